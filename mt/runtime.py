"""Where training runs: device, precision, and the torch.distributed process group under `torchrun`."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from mt.config import TrainConfig
from mt.errors import ConfigError


@dataclass
class Runtime:
    device: torch.device
    rank: int = 0
    world: int = 1
    autocast_dtype: torch.dtype | None = None  # None: plain fp32

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world > 1

    def autocast(self):
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def barrier(self) -> None:
        if self.distributed:
            dist.barrier()

    def sum(self, values: torch.Tensor) -> torch.Tensor:
        """Element-wise sum of a device tensor over all processes (identity when alone); no host read."""
        if self.distributed:
            dist.all_reduce(values)
        return values


def pick_device(name: str, option: str = "train.device") -> torch.device:
    """auto, cpu or cuda as a torch device; `option` names the setting in the error."""
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{option} is cuda but no CUDA device is available")
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(name)


def setup_runtime(cfg: TrainConfig, log=print) -> Runtime:
    """Single process, or one rank of a `torchrun` job (WORLD_SIZE/RANK/LOCAL_RANK in the environment)."""
    device = pick_device(cfg.device)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:
        if device.type == "cuda":
            local_rank, gpus = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
            if local_rank >= gpus:
                local_world = os.environ.get("LOCAL_WORLD_SIZE", "more")
                raise ConfigError(f"torchrun started {local_world} processes on this machine but it has {gpus} "
                                  f"GPU(s): use --nproc_per_node {gpus}, or train.device=cpu")
            device = torch.device("cuda", local_rank)
            torch.cuda.set_device(device)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if device.type == "cpu":
        keep_freed_memory()
    else:
        attention_without_cudnn()
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]
    if dtype is not None and device.type != "cuda":
        log(f"warning: train.precision {cfg.precision} needs CUDA; training in fp32 on {device.type}")
        dtype = None
    return Runtime(device, rank, world, dtype)


def attention_without_cudnn() -> None:
    """Keep SDPA off its cuDNN kernel on CUDA; it picks flash or memory-efficient attention instead.

    cuDNN attention (torch's first choice for bf16/fp16 on an H100) builds a plan for every new shape: 420-630 ms
    at the first call of a shape against 1.1 ms without it (H100, torch 2.11). Training batches and greedy decoding
    make new shapes all the time: transformer-base's first 60 updates on DDTP took 87 s with it and 26 s without,
    and a dev evaluation 37.5 s against 2.5 s, with the same losses (docs/benchmarks.md, "On a GPU")."""
    torch.backends.cuda.enable_cudnn_sdp(False)


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt's parameter numbers (glibc's malloc.h)


def keep_freed_memory() -> bool:
    """Let glibc's malloc keep freed memory for the next allocation instead of handing it back to the system.

    A CPU training step makes the same large tensors every update (the logits alone are batch x vocabulary
    floats: 110 MB for the protocol model). glibc serves each block over 32 MB with its own mmap and unmaps it
    when freed, so the next update faults every page back in, zeroed by the kernel; it also trims the heap's
    free top after every large free. With no mmap and no trimming the memory is reused: 8-10% more target
    tokens/s for the protocol model (docs/benchmarks.md). The process keeps its peak memory until it exits.
    False (and nothing changes) where the C library is not glibc."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return False
    libc = ctypes.CDLL(libc_name)
    if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"):
        return False
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1))


def teardown_runtime(rt: Runtime) -> None:
    if rt.distributed and dist.is_initialized():
        dist.destroy_process_group()


def is_terminal() -> bool:
    return sys.stderr.isatty()


def batch_padding(setting: int | str, device: torch.device, compiled: bool) -> int:
    """`data.pad_to_multiple`: a number as given; auto is 8 on CUDA or with a compiled model (shapes that repeat
    suit tensor cores and compiled graphs) and 1 on a CPU, where padding only adds work: about 30% of the
    protocol model's training speed (docs/benchmarks.md)."""
    if setting != "auto":
        return int(setting)
    return 8 if device.type == "cuda" or compiled else 1
