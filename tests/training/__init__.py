"""Tests of mt/training: the training loop, its recipe, moving average and distributed runs."""
