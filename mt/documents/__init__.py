"""Documents to sentences and back: plain text's sentences and spacing, HTML's markup and inline elements."""
