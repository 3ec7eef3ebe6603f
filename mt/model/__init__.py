"""The paper's Transformer and what runs it: kernels, the decoder's KV cache, int8 weights, ensembles."""
