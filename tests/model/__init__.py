"""Tests of mt/model: the Transformer, its cache, kernels, ensembles and depths."""
