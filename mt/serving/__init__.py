"""mt serve: the app, its state, the decode thread, limits, keys, glossary, markup, segments, metrics."""
