"""Tests of mt/documents: each document format, inline markup, PDF and localization files."""
