"""Misaligned pairs, by a threshold that the corpus sets itself: `mt clean`'s `misaligned` filter.

A pair whose target translates another source passes every rule of mt/data/clean_filters.py when its length,
language and numbers look right. This filter scores a block of kept pairs with eflomal (mt/data/eflomal_scores.py;
words compared by their first `STEM` letters, which halves the good pairs scored as badly as misaligned ones on
the shipped corpora) together with pairs misaligned on purpose: the block's own sources, each beside the target of
another of its pairs drawn at random (the synthetic negatives bicleaner trains on). A pair's score is its forward
plus its reverse score.

The threshold comes from the block: its scores are a mixture of translations and of misaligned pairs scored as
the shuffled ones are. The shuffled pairs' scores are cut into bins of equal count; the block's share of
misaligned pairs is estimated from its pairs above the shuffled ones' `LAMBDA` quantile, where translations are
rare (Storey's estimate of a null share, 2002: that share / (1 - LAMBDA)); each bin is then expected to hold
that share / bins of the block's pairs misaligned, and the bins from the top down where these are more than half
of the pairs the bin holds are removed (Efron's local false discovery rate, 2001, under 0.5). A clean corpus
holds few pairs where shuffled ones score; a crawled one loses what scores as shuffled pairs do (docs/cleaning.md).

A block whose estimated share is under `MIN_SHARE` loses nothing: the top of a corpus' scores holds free
translations as well as misaligned pairs (DDTP's German titles describe the package that the English names), and
at that rate they are as likely; DDTP de-en's share is 0.1-0.2%, the benchmark's 8.5%. Nor does a block whose
share is above `MAX_SHARE`: its pairs score as they do shuffled, so the score cannot tell them apart (sentences
of one template, or a corpus misaligned as a whole), and a note says so.

Not judged: a pair with a side of fewer than `misaligned_min_words` words (the alignment of a two-word title says
little: translators name a package where the other side describes it), and a block of fewer than `MIN_PAIRS`
pairs judged (too few to fit eflomal's model and to estimate the mixture).
"""

from __future__ import annotations

import numpy as np

from mt.config import CleanConfig
from mt.data.eflomal_scores import alignment_scores

STEM, LAMBDA, MIN_PAIRS, MIN_SHARE, MAX_SHARE = 4, 0.75, 1000, 0.005, 0.5
BINS, PER_BIN = 20, 50  # at most 20 bins, of at least 50 shuffled pairs


def misaligned(sources: list[str], targets: list[str], cfg: CleanConfig, rng: np.random.Generator,
               log=print) -> np.ndarray:
    """Per pair, whether it scores as the block's shuffled pairs do (see above)."""
    removed = np.zeros(len(sources), dtype=bool)
    k = cfg.misaligned_min_words
    judged = np.flatnonzero([len(s.split()) >= k and len(t.split()) >= k for s, t in zip(sources, targets)])
    if len(judged) < MIN_PAIRS:
        return removed
    n = min(cfg.misaligned_sample, len(judged) // 5)  # at most a sixth of what eflomal fits its model to
    src_of = rng.choice(len(judged), n, replace=False)
    tgt_of = (src_of + rng.integers(1, len(judged), n)) % len(judged)  # another pair's target, never its own
    fwd, rev = alignment_scores(sources + [sources[i] for i in judged[src_of]],
                                targets + [targets[i] for i in judged[tgt_of]], stem=STEM)
    scores = fwd + rev
    corpus, shuffled = scores[judged], scores[len(sources):]
    share = misaligned_share(corpus, shuffled)
    if share > MAX_SHARE:
        log(f"misaligned: {len(judged):,} pairs score as they do with their targets shuffled ({share:.0%} look "
            "misaligned): the score cannot tell them apart, none removed")
        return removed
    if share >= MIN_SHARE:
        removed[judged] = corpus > threshold(corpus, shuffled, share)
    return removed


def misaligned_share(corpus: np.ndarray, shuffled: np.ndarray) -> float:
    """Storey's estimate: the share of `corpus` above the shuffled scores' LAMBDA quantile, over 1 - LAMBDA."""
    return min(1.0, float((corpus > np.quantile(shuffled, LAMBDA)).mean()) / (1 - LAMBDA))


def threshold(corpus: np.ndarray, shuffled: np.ndarray, share: float | None = None) -> float:
    """The lowest score above which, bin by bin, the pairs of `corpus` are more likely misaligned than not;
    infinity when none are. `share`: the corpus' misaligned share (default: `misaligned_share`)."""
    bins = max(2, min(BINS, len(shuffled) // PER_BIN))
    edges = np.quantile(shuffled, np.linspace(0, 1, bins + 1))
    edges[0], edges[-1] = -np.inf, np.inf
    share = misaligned_share(corpus, shuffled) if share is None else share
    in_bin = np.histogram(corpus, edges)[0]
    expected = share * len(corpus) / bins  # misaligned pairs in each bin
    top = bins
    while top > 0 and expected > 0.5 * in_bin[top - 1]:
        top -= 1
    return float(edges[top])
