"""How well the words of a sentence pair align: eflomal's sentence scores (Östling and Tiedemann, 2016), as
OpusFilter's WordAlignFilter uses them, for `mt clean`'s `misaligned` and `word_alignment` filters.

eflomal fits IBM model 1, an HMM and fertility (model 3) to the pairs it is given, by Gibbs sampling, then scores
each pair in both directions: the mean negative log-probability of a target word under its best alignment (the
forward score), and of a source word (the reverse score). A translation scores low both ways; a pair whose
target translates another source (a misaligned pair) scores high, since no source word explains its words. The
model is fitted to the pairs being scored, so a block needs thousands of pairs for the scores to mean something,
and eflomal's sampler is seeded from the system: two runs may differ on pairs near the threshold.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from mt.errors import DataError

_TOKEN = re.compile(r"\w+|[^\w\s]")  # words and single punctuation marks (eflomal splits on spaces, lowercases)


def tokenized(text: str) -> str:
    return " ".join(_TOKEN.findall(text.lower()))


def alignment_scores(sources: list[str], targets: list[str], stem: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Per pair, eflomal's forward and reverse scores (mean negative log-probability per word: higher is worse),
    with the model fitted to these pairs; 0 for a pair with a side without a word. `stem`: words are compared by
    their first `stem` letters (eflomal's prefix length; 0: whole words)."""
    import eflomal

    tokens = [(tokenized(s), tokenized(t)) for s, t in zip(sources, targets)]
    scored = [i for i, (s, t) in enumerate(tokens) if s and t]  # a side without a word: nothing to align
    forward, reverse = np.zeros(len(sources)), np.zeros(len(sources))
    if not scored:
        return forward, reverse
    with tempfile.TemporaryDirectory(prefix="mt-align-") as folder:
        fwd, rev = Path(folder, "forward"), Path(folder, "reverse")
        aligner = eflomal.Aligner(source_prefix_len=stem, target_prefix_len=stem)
        try:
            aligner.align([tokens[i][0] for i in scored], [tokens[i][1] for i in scored],
                          scores_filename_fwd=str(fwd), scores_filename_rev=str(rev), quiet=True)
        except (subprocess.CalledProcessError, OSError) as e:  # its files are in the temporary folder
            raise DataError(f"eflomal failed on {len(scored):,} pairs ({e.__class__.__name__}); is there room in "
                            f"{tempfile.gettempdir()} (TMPDIR) and within ulimit -f?") from None
        forward[scored], reverse[scored] = _scores(fwd, len(scored)), _scores(rev, len(scored))
    return forward, reverse


def _scores(path: Path, n: int) -> np.ndarray:
    scores = np.loadtxt(path, dtype=np.float64, ndmin=1)
    assert len(scores) == n, f"eflomal wrote {len(scores)} scores for {n} pairs"
    return scores
