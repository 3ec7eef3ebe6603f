"""Training's dev evaluation: loss under teacher forcing and greedy BLEU (and chrF) of the dev set, on rank 0,
interruptible by the signal that stops training."""

from __future__ import annotations

import contextlib
import math
import signal
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
import torch

from mt.decoding.model_backend import ModelBackend
from mt.decoding.protocol import Translator
from mt.data.batching import collate, token_batches
from mt.data.corpus import Corpus
from mt.decoding.text_front_end import translate_lines
from mt.training.corpus_scores import bleu_score, score_corpus
from mt.model.transformer import Transformer
from mt.training.recipe import label_smoothed_loss


class EvaluationInterrupted(Exception):
    """A signal arrived during a dev evaluation, which is dropped so the run can save and stop at once."""


class StopRequested:
    """SIGINT/SIGTERM set a flag; the loop saves a checkpoint at the end of the current step and exits. Inside
    `interruptible()` (a dev evaluation, which can take longer than a scheduler's grace period) the signal also
    raises EvaluationInterrupted."""

    def __init__(self):
        self.signal_name = None
        self.signal_number = None
        self._previous = {}
        self._interruptible = False

    @contextlib.contextmanager
    def interruptible(self):
        self._interruptible = True
        try:
            yield
        finally:
            self._interruptible = False

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.signal_name is not None:
            if signum == signal.SIGINT:  # a second Ctrl-C: stop right away
                raise KeyboardInterrupt
            return  # SIGTERM again (`timeout` signals the command, then its process group): the first is enough
        self.signal_name, self.signal_number = signal.Signals(signum).name, signum
        if self._interruptible:
            raise EvaluationInterrupted

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)


@torch.no_grad()
def dev_loss(model: Transformer, corpus: Corpus, batch_tokens: int, device) -> tuple[float, int]:
    """Mean NLL per target token under teacher forcing (pairs longer than the model's positions left out),
    and the token count."""
    costs = corpus.costs().numpy()
    fits = np.flatnonzero(costs <= model.cfg.max_positions)
    nll_sum, tokens = torch.zeros((), device=device), 0
    for batch_of_fits in token_batches(costs[fits], batch_tokens):
        batch = collate(corpus, fits[batch_of_fits]).to(device)
        logits = model(batch.src, batch.src_mask, batch.tgt_in)
        nll_sum += label_smoothed_loss(logits, batch.tgt_out, 0.0)[1]
        tokens += batch.n_tokens
    return nll_sum.item() / max(tokens, 1), tokens


def evaluate(run, stop: StopRequested, record: Callable[[dict], None]) -> float | None:
    """Dev loss, perplexity and greedy BLEU (and chrF when it is train.best_metric) on rank 0, the others
    waiting; returns the score of train.best_metric, higher is better (minus the loss for loss; None on the
    other ranks, and when a signal stopped the evaluation). `run` is the training run (mt.training.loop.TrainingRun);
    `record` writes the dev row of metrics.jsonl."""
    score = None
    if run.rt.is_main:
        try:
            with stop.interruptible():
                row, score = _evaluate_on_main(run)
        except EvaluationInterrupted:
            run.say(f"step {run.state.step}: {stop.signal_name} during the dev evaluation; it is skipped")
        else:
            record(row)
            chrf = f" chrF {row['chrf']:.2f}" if "chrf" in row else ""
            weights = ", moving average" if run.learner.ema is not None else ""
            each = "".join(f", {key[5:]} {value:.2f}" for key, value in row.items() if key.startswith("bleu_"))
            run.say(f"step {run.state.step}: dev loss {row['loss']:.3f} ppl {row['ppl']:.2f} BLEU {row['bleu']:.2f}"
                    f"{chrf} (greedy{weights}{each}, {row['eval_s']}s)")
        finally:
            run.learner.model.train()
    run.rt.barrier()
    return score


def _evaluate_on_main(run) -> tuple[dict, float]:
    """Rank 0's part of `evaluate`: the dev row of metrics.jsonl, and the score."""
    cfg, rt, data, model = run.cfg, run.rt, run.data, run.learner.eval_model
    model.eval()
    start = time.perf_counter()
    nll, _ = dev_loss(model, data.dev, cfg.train.batch_tokens, rt.device)
    translator = Translator(ModelBackend(model), data.src_tokenizer, data.tgt_tokenizer, cfg)
    scores = [_direction_scores(translator, source, target, lines, cfg.train.best_metric == "chrf", rt)
              for source, target, lines in _dev_parts(data)]
    row = {"step": run.state.step, "split": "dev", "loss": round(nll, 4), "ppl": round(math.exp(min(nll, 50)), 2),
           "bleu": float(np.mean([s["bleu"] for _, s in scores]))}
    if cfg.train.best_metric == "chrf":
        row["chrf"] = float(np.mean([s["chrf"] for _, s in scores]))
    if len(scores) > 1:  # a multilingual model: its score is the mean over the directions, each one logged
        row.update({f"{metric}_{direction}": value for direction, s in scores for metric, value in s.items()})
    row["eval_s"] = round(time.perf_counter() - start, 1)
    return row, {"bleu": row["bleu"], "chrf": row.get("chrf"), "loss": -nll}[cfg.train.best_metric]


def _dev_parts(data) -> list[tuple[str | None, str | None, tuple[list[str], list[str]]]]:
    """The dev set split by direction: (source language, target language, (source lines, references))."""
    parts, start = [], 0
    for source, target, n in data.dev_directions:
        parts.append((source, target, (data.dev_src[start:start + n], data.dev_ref[start:start + n])))
        start += n
    return parts


def _direction_scores(translator: Translator, source: str | None, target: str | None,
                      lines: tuple[list[str], list[str]], chrf: bool, rt) -> tuple[str, dict]:
    """Greedy BLEU (and chrF) of one direction's dev set, keyed by its source-target."""
    tr = translator.toward(source, target, "the dev set")
    with rt.autocast(), torch.no_grad():  # (with autograd on, each decoding step would record a graph)
        hyps = translate_lines(tr, lines[0], replace(tr.cfg.decode, beam_size=1))
    texts = [h[0][0] for h in hyps]
    scores = {"bleu": bleu_score(texts, lines[1])}
    if chrf:
        scores["chrf"] = round(score_corpus(texts, lines[1], ["chrf"])["chrf"]["score"], 2)
    return f"{source}-{target}", scores
