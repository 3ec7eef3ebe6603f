"""The training loop and what it reports: recipe, update, evaluation, EMA, FLOPs, the run log, corpus scores."""
