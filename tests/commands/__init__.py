"""Tests of mt/commands and mt/cli.py: commands driven end to end through the real `mt` command."""
