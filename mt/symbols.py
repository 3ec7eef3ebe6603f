"""The special token ids every vocabulary shares (sentencepiece is trained to put them here)."""

PAD, UNK, BOS, EOS = 0, 1, 2, 3
