"""Where training runs: device, precision, and the torch.distributed process group under `torchrun`."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from mt.config import DEVICES, TrainConfig
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


def check_device_name(name: str, option: str) -> None:
    if name not in DEVICES:
        raise ConfigError(f"{option}: one of {', '.join(DEVICES)}, got '{name}'")


def pick_device(name: str, option: str = "train.device") -> torch.device:
    """auto, cpu or cuda as a torch device; `option` names the setting in the error."""
    check_device_name(name, option)
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
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[cfg.precision]
    if dtype is not None and device.type != "cuda":
        log(f"warning: train.precision {cfg.precision} needs CUDA; training in fp32 on {device.type}")
        dtype = None
    return Runtime(device, rank, world, dtype)


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
