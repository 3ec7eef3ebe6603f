"""Corpus scores through sacrebleu, each with its signature, so numbers match `sacrebleu` on the same files."""

from __future__ import annotations

from sacrebleu.metrics import BLEU, CHRF, TER

from mt.errors import MtError

METRICS = {"bleu": BLEU, "chrf": CHRF, "ter": TER}


def score_corpus(hypotheses: list[str], references: list[str], metrics=("bleu", "chrf")) -> dict:
    """{metric: {"score": float, "signature": str}} for detokenized hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise MtError(f"hypotheses have {len(hypotheses)} lines but references have {len(references)}")
    scores = {}
    for name in metrics:
        if name not in METRICS:
            raise MtError(f"unknown metric '{name}' (choose from {', '.join(METRICS)})")
        metric = METRICS[name]()
        result = metric.corpus_score(hypotheses, [references])
        scores[name] = {"score": round(result.score, 4), "signature": str(metric.get_signature())}
    return scores


def bleu_score(hypotheses: list[str], references: list[str]) -> float:
    return score_corpus(hypotheses, references, ("bleu",))["bleu"]["score"]
