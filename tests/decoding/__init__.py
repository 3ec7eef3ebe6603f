"""Tests of mt/decoding: the searches, the scheduler, the line front end and what decodes through it."""
