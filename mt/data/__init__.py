"""Text to batches: the tokenizer, parallel text, the prepared corpus, batching, mixing, mt prepare and mt clean."""
