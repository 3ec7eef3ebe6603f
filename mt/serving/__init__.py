"""mt serve: the app, its models, the decode thread, limits, keys, glossary, markup, segments, metrics."""
