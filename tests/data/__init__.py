"""Tests of mt/data: tokenizer, prepared cache, batching, mixing, cleaning and dataset input."""
