"""How close a run is to the hardware: FLOPs of a training step, counted from real token counts, and the
device's matmul peak (MFU = achieved FLOP/s / peak).

The peak is a yardstick that holds still: measured once per machine (device, dtype and thread count), as the
best of several trials, and kept in a cache file that every later run reads; measuring it again at each start
gave MFU figures that swung from 40% to 64% for the same throughput on a busy virtual machine. It is measured
again only when a run proves it low (faster than it), and the cache keeps the highest measurement.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import torch

from mt.config import ModelConfig
from mt.atomic_files import atomic_write_text


def training_flops(cfg: ModelConfig, vocab: int, src_lengths: torch.Tensor, tgt_lengths: torch.Tensor) -> float:
    """Matmul FLOPs of forward + backward (3x forward) for pairs of real lengths S_i, T_i (EOS/BOS included).

    Per layer, with D = d_model, F = d_ff, 2 FLOPs per multiply-add:
      encoder, per source token: Q,K,V,O projections 8D^2, FFN 4DF, attention scores and sum 4*S_i*D
      decoder, per target token: self-attention 8D^2 + 2*T_i*D (causal: half the square),
               cross-attention Q,O 4D^2 + 4*S_i*D, FFN 4DF; per source token: cross K,V 4D^2
      output projection, per target token: 2DV.
    Padding, layer norms, softmax and element-wise work are not counted (the usual MFU convention).
    """
    d, f = cfg.d_model, cfg.d_ff
    s, t = src_lengths.double(), tgt_lengths.double()
    encoder = cfg.encoder_layers * (s * (8 * d * d + 4 * d * f) + 4 * s * s * d)
    decoder = cfg.decoder_layers * (t * (12 * d * d + 4 * d * f) + 2 * t * t * d + 4 * t * s * d + s * 4 * d * d)
    output = t * 2 * d * vocab
    return 3.0 * float((encoder + decoder + output).sum())


def matmul_peak_flops(device: torch.device, dtype: torch.dtype = torch.float32, seconds: float = 0.3,
                      trials: int = 1) -> float:
    """FLOP/s of a large square matmul on `device` in `dtype`, measured now: the best of `trials` runs of
    `seconds` each (a practical peak, not the spec)."""
    size = 8192 if device.type == "cuda" else 1024
    own = torch.Generator(device=device).manual_seed(0)  # leave the global RNG (dropout, exact resume) alone
    a = torch.randn(size, size, device=device, dtype=dtype, generator=own)
    b = torch.randn(size, size, device=device, dtype=dtype, generator=own)
    _sync(device)
    a @ b  # warm-up (kernel selection, caches)
    _sync(device)
    best = 0.0
    for _ in range(trials):
        runs, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds or runs < 3:
            a @ b
            runs += 1
            if device.type == "cuda" and runs % 10:
                continue
            _sync(device)
        _sync(device)
        best = max(best, 2.0 * size ** 3 * runs / (time.perf_counter() - start))
    return best


class MachinePeak:
    """This machine's matmul peak for a device, dtype and torch's thread count: measured (best of 5 trials) the
    first time, then read from the cache file (delete it to measure again). `where` says where it came from.

    A run faster than the peak proves the peak was measured under load: `mfu` then measures it again (once a
    run) and keeps the larger of that and the run's rate, in the cache too, so that a stale peak is replaced
    rather than kept as each run's yardstick (raised to the run's rate alone, it made every MFU 100%), and an
    MFU over 100% is never reported. The cache never goes down: a measurement lower than it is not stored.
    """

    def __init__(self, device: torch.device, dtype: torch.dtype = torch.float32):
        self.device, self.dtype, self.measured_again = device, dtype, False
        self.key = f"{_device_name(device)} | {dtype} | {torch.get_num_threads()} threads"
        self.path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mt" / "matmul_peak.json"
        known = self._known()
        if self.key in known:
            self.flops = float(known[self.key]["flops"])
            self.where = f"{self.key}, measured {known[self.key]['measured']} ({self.path})"
        else:
            self.flops = matmul_peak_flops(device, dtype, trials=5)
            self._store(time.strftime("%Y-%m-%d"))
            self.where = f"{self.key}, measured now ({self.path})"

    def mfu(self, flops_per_s: float) -> float:
        """The share of the peak that `flops_per_s` is (at most 1: see the class)."""
        if flops_per_s > self.flops:
            self._raise(flops_per_s)
        return flops_per_s / self.flops

    def _raise(self, flops_per_s: float) -> None:
        """The peak proved low by a run at `flops_per_s`: measured again (the first time), and the larger kept."""
        how = "raised to a training run's rate"
        if not self.measured_again:
            self.measured_again = True
            measured = self._measure_again()
            if measured > flops_per_s:
                how = "measured again after a run beat the peak before"
            flops_per_s = max(flops_per_s, measured)
        self.flops = flops_per_s
        self._store(f"{time.strftime('%Y-%m-%d')}, {how}")
        self.where = f"{self.key}, {how} ({self.path})"

    def _measure_again(self) -> float:
        try:
            return matmul_peak_flops(self.device, self.dtype, trials=5)
        except torch.OutOfMemoryError:  # a run that fills the GPU leaves no room for the matrices: no measurement
            return 0.0

    def _known(self) -> dict:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}

    def _store(self, measured: str) -> None:
        known = self._known()
        if float(known.get(self.key, {}).get("flops", 0.0)) >= self.flops:
            return  # another run stored a higher peak meanwhile: kept
        known[self.key] = {"flops": self.flops, "measured": measured}
        try:
            atomic_write_text(self.path, json.dumps(known, indent=1))
        except OSError:
            pass  # a read-only home: the yardstick is this run's measurement


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"{_cpu_model() or platform.machine()} x {os.cpu_count()} CPUs"


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
