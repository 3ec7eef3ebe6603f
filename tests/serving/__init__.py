"""Tests of mt/serving: `mt serve` as a real process, its hostile clients and its web page."""
