"""Tests of mt/commands and mt/cli/: commands driven end to end through the real `mt` command."""
