"""The failure suites: every command given bad input, failing outputs and signals says one line and loses
nothing (the file, key or option named, no traceback, the user's files unchanged)."""
