"""Tests of mt/interop: exports and imports (CTranslate2, Hugging Face, Marian, M2M100, Argos)."""
