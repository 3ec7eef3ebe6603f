"""`mt bench train`: `mt`'s real training step against a plain PyTorch loop of the same size and precision,
in one process, on the same batches, timed in alternating blocks so that a busy machine slows both alike.

The reference is what a user would write in an afternoon: torch.nn.Transformer, one embedding matrix tied
to the output projection, sinusoidal positions, cross-entropy with label smoothing and Adam (fused), its
batches already on the device. `ratio` = mt tokens/s / reference tokens/s.
"""

from __future__ import annotations

import dataclasses
import math
import resource
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from mt.data.batching import Batch, BatchPrefetcher, BatchSchedule, training_batches
from mt.config import Config, ModelConfig
from mt.data.prepare import STAMP, data_dir, prepare_data
from mt.training.flops import MachinePeak, training_flops
from mt.model.transformer import build_model, sinusoidal_positions
from mt.training.recipe import noam_lr
from mt.runtime import Runtime, batch_padding, setup_runtime, teardown_runtime
from mt.symbols import PAD
from mt.training.update import make_learner, train_step


class ReferenceTransformer(nn.Module):
    """torch.nn.Transformer with a tied embedding/output matrix, scaled embeddings and sinusoidal positions."""

    def __init__(self, cfg: ModelConfig, vocab: int):
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.embed = nn.Embedding(vocab, cfg.d_model, padding_idx=PAD)
        self.register_buffer("positions", sinusoidal_positions(cfg.max_positions, cfg.d_model), persistent=False)
        self.transformer = nn.Transformer(cfg.d_model, cfg.n_heads, cfg.encoder_layers, cfg.decoder_layers,
                                          cfg.d_ff, cfg.dropout, batch_first=True, norm_first=cfg.norm == "pre")

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        x = self.embed(src) * self.scale + self.positions[:src.size(1)]
        y = self.embed(tgt_in) * self.scale + self.positions[:tgt_in.size(1)]
        causal = nn.Transformer.generate_square_subsequent_mask(tgt_in.size(1), device=src.device)
        pad = src == PAD
        h = self.transformer(x, y, tgt_mask=causal, tgt_is_causal=True, src_key_padding_mask=pad,
                             memory_key_padding_mask=pad)
        return F.linear(h, self.embed.weight)


class _TimedBatches:
    """Hands out the prefetched batches, adding up their target tokens and the main-thread time spent getting
    them (waiting for the background thread and queueing the copy to the device)."""

    def __init__(self, source: BatchPrefetcher):
        self.source, self.seconds, self.tokens = source, 0.0, 0

    def next_batch(self) -> Batch:
        start = time.perf_counter()
        batch = self.source.next_batch()
        self.seconds += time.perf_counter() - start
        self.tokens += batch.n_tokens
        return batch


def bench_train(cfg: Config, steps: int = 50, warmup: int = 5, blocks: int = 5, log=print) -> dict:
    """Time `steps` updates of mt and of the reference (after `warmup` each) -> the numbers `mt bench` prints."""
    rt = setup_runtime(cfg.train, log=log)
    try:
        with tempfile.TemporaryDirectory(prefix="mt-bench-") as scratch:
            return _bench(_reading_data(cfg, Path(scratch)), rt, steps, warmup, blocks, log)
    finally:
        teardown_runtime(rt)


def _reading_data(cfg: Config, scratch: Path) -> Config:
    """`cfg`, reading output_dir's prepared corpus where there is one, else preparing it in `scratch`: a
    benchmark leaves nothing behind."""
    return cfg if (data_dir(cfg) / STAMP).exists() else dataclasses.replace(cfg, output_dir=str(scratch))


def _bench(cfg: Config, rt: Runtime, steps: int, warmup: int, blocks: int, log) -> dict:
    data = prepare_data(cfg, log=log)
    vocab = len(data.tgt_tokenizer)
    tc = cfg.train
    pad = batch_padding(cfg.data.pad_to_multiple, rt.device, tc.compile)
    plan = training_batches(data.train, tc.batch_tokens, cfg.model.max_positions)
    total = (warmup + steps) * tc.accum_steps
    ours = _Side("mt", cfg, rt, _mt_step(cfg, rt, vocab, BatchSchedule(data.train, plan, tc.seed, 0, 1, pad)))
    reference_schedule = BatchSchedule(data.train, plan, tc.seed, 0, 1, pad)
    on_device = [reference_schedule.next_batch().to(rt.device) for _ in range(total)]
    theirs = _Side("reference", cfg, rt, _reference_step(cfg, rt, vocab, iter(on_device)))
    log(f"bench: {steps} steps per side after {warmup} warm-up steps{' (compiling)' if tc.compile else ''}, "
        f"device {rt.device}, precision {tc.precision}")
    for side in (ours, theirs):
        side.run(warmup)
        side.reset()
    per_block = [steps // blocks + (1 if i < steps % blocks else 0) for i in range(blocks)]
    for n in per_block:
        ours.run(n)
        theirs.run(n)
    peak = MachinePeak(rt.device, rt.autocast_dtype or torch.float32)
    return _summary(cfg, rt, ours, theirs, steps, peak)


class _Side:
    """One contender: a step function returning (target tokens, FLOPs, host seconds), and its running totals."""

    def __init__(self, name: str, cfg: Config, rt: Runtime, step):
        self.name, self.cfg, self.rt, self.step = name, cfg, rt, step
        self.reset()

    def reset(self) -> None:
        self.seconds = self.tokens = self.flops = self.host = 0.0
        if self.rt.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.rt.device)

    def run(self, n: int) -> None:
        _sync(self.rt.device)
        start = time.perf_counter()
        for _ in range(n):
            tokens, flops, host = self.step()
            self.tokens, self.flops, self.host = self.tokens + tokens, self.flops + flops, self.host + host
        _sync(self.rt.device)
        self.seconds += time.perf_counter() - start


def _mt_step(cfg: Config, rt: Runtime, vocab: int, schedule: BatchSchedule):
    """mt's own update (`mt.training.update.train_step`): prefetching, fused Adam, device-side sums, optional compile."""
    torch.manual_seed(cfg.train.seed)
    model = build_model(cfg.model, vocab, vocab, cfg.tokenizer.joint).to(rt.device).train()
    learner = make_learner(model, cfg.train, rt)
    batches = _TimedBatches(BatchPrefetcher(schedule, rt.device))
    count = 0

    def step():
        nonlocal count
        count += 1
        for group in learner.optimizer.param_groups:
            group["lr"] = noam_lr(count, cfg.model.d_model, cfg.train.warmup_steps, cfg.train.lr_scale)
        seconds, tokens = batches.seconds, batches.tokens
        _, flops, skipped = train_step(cfg, rt, learner, batches)
        bool(skipped)  # the training loop's one host read per step
        return float(batches.tokens - tokens), flops, batches.seconds - seconds

    return step


def _reference_step(cfg: Config, rt: Runtime, vocab: int, batches):
    """The plain loop: forward, label-smoothed loss per token, backward, fused Adam step."""
    torch.manual_seed(cfg.train.seed)
    model = ReferenceTransformer(cfg.model, vocab).to(rt.device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(cfg.train.adam_beta1, cfg.train.adam_beta2),
                                 eps=cfg.train.adam_eps, fused=True)
    scaler = torch.amp.GradScaler("cuda", enabled=rt.autocast_dtype == torch.float16)
    forward = torch.compile(model) if cfg.train.compile else model

    def step():
        micro = [next(batches) for _ in range(cfg.train.accum_steps)]
        n_tokens = sum(b.n_tokens for b in micro)
        for batch in micro:
            with rt.autocast():
                logits = forward(batch.src, batch.tgt_in)
                loss = F.cross_entropy(logits.flatten(0, 1).float(), batch.tgt_out.flatten(), ignore_index=PAD,
                                       label_smoothing=cfg.train.label_smoothing, reduction="sum")
            scaler.scale(loss / n_tokens).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        flops = sum(training_flops(cfg.model, vocab, b.src_lengths, b.tgt_lengths) for b in micro)
        return float(n_tokens), flops, 0.0

    return step


def _summary(cfg: Config, rt: Runtime, ours: _Side, theirs: _Side, steps: int, peak: MachinePeak) -> dict:
    tokens_per_s = ours.tokens / ours.seconds
    reference_tokens_per_s = theirs.tokens / theirs.seconds
    rate, reference_rate = ours.flops / ours.seconds, theirs.flops / theirs.seconds
    peak.mfu(max(rate, reference_rate))  # the faster side may raise the peak: both are measured against one
    memory = (torch.cuda.max_memory_allocated(rt.device) / 2 ** 20 if rt.device.type == "cuda"
              else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return {"device": str(rt.device), "precision": cfg.train.precision, "compile": cfg.train.compile,
            "steps": steps, "tokens_per_s": round(tokens_per_s, 1),
            "reference_tokens_per_s": round(reference_tokens_per_s, 1),
            "ratio": round(tokens_per_s / reference_tokens_per_s, 3),
            "step_ms": round(1000 * ours.seconds / steps, 2),
            "reference_step_ms": round(1000 * theirs.seconds / steps, 2),
            "host_ms_per_step": round(1000 * ours.host / steps, 3),
            "tflops": round(ours.flops / ours.seconds / 1e12, 4),
            "reference_tflops": round(theirs.flops / theirs.seconds / 1e12, 4),
            "peak_tflops": round(peak.flops / 1e12, 4),
            "mfu": round(peak.mfu(rate), 4), "reference_mfu": round(peak.mfu(reference_rate), 4),
            "peak_memory_mb": round(memory, 1), "compiled_graphs": _compiled_graphs()}


def _compiled_graphs() -> int:
    """Graphs torch.compile built in this process (both sides; forward and backward count once per graph)."""
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
