"""Process tuning of the `mt` command, in one function its `main()` calls first: `tune_process`.

Nothing here runs at import, and nothing else in mt changes the process: a program that imports mt (a notebook,
a test, `mt.decoding.lines.load_translator`) keeps torch's and glibc's defaults unless it calls `tune_process` itself,
before it imports torch. docs/design.md ("Process tuning") gives each setting's measured reason. The one
thing done later is `return_freed_memory`, which `mt serve`'s decode thread calls when its models go idle.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import time

TRAINING_COMMANDS = (["train"], ["bench", "train"])
MODEL_COMMANDS = TRAINING_COMMANDS + (["translate"], ["evaluate"], ["serve"])  # they run a model: mallopt pays off
LOAD_COMMANDS = MODEL_COMMANDS + (["score"], ["distill"])  # they run a model's threads: the machine's load is sampled


def command_of(args: list[str]) -> list[str]:
    """The command words of `mt ARGS` (its global options before them left out): ["bench", "train", ...]."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 1
    return args[i:]


def is_one_of(command: list[str], commands) -> bool:
    return any(command[:len(words)] == words for words in commands)


BUSY_CORES = 0.5  # cores kept busy by other processes from which mt's OpenMP threads no longer spin


def openmp_spin_count(command: list[str], other_load: float | None) -> str | None:
    """GOMP_SPINCOUNT for `command` with `other_load` cores busy with other work as it starts (None: unknown, as
    idle): 0 on a busy machine; else 30,000, and None (GNU OpenMP's 300,000) for training.

    torch's CPU threads (and CTranslate2's) wait at a barrier after each parallel operation; GNU OpenMP spins
    300,000 rounds there before it sleeps. On an idle machine spinning pays: decoding runs hundreds of small
    parallel operations per step, and with no spinning at all beam search took 1.8x as long; 30,000 rounds cost
    it nothing and training about 10% (its operations are large, so it keeps GNU's count). On a machine whose
    cores other processes use, a spinning thread keeps the core from the thread it waits for, and every count
    above 0 was slower, 2-9x for the export (docs/benchmarks.md, "Threads that spin")."""
    if other_load is not None and other_load >= BUSY_CORES:
        return "0"
    return None if is_one_of(command, TRAINING_COMMANDS) else "30000"


def other_load(window: float = 0.1) -> float | None:
    """Cores that processes other than this one kept busy over the next `window` seconds (/proc/stat's busy time
    of all CPUs, less this process's own); None where /proc cannot tell (not Linux). A sample, not the load
    average: that trails the last minute, and mt starts beside work that began seconds ago or just ended."""
    try:
        before, own_before = _busy_ticks(), _own_ticks()
        time.sleep(window)
        after, own_after = _busy_ticks(), _own_ticks()
    except (OSError, ValueError, IndexError):
        return None
    ticks = window * os.sysconf("SC_CLK_TCK")
    return max(0.0, ((after - before) - (own_after - own_before)) / ticks)


def _busy_ticks() -> int:
    """The machine's busy clock ticks so far: /proc/stat's `cpu` line less its idle and iowait columns."""
    with open("/proc/stat", encoding="ascii") as f:
        values = [int(v) for v in f.readline().split()[1:9]]  # user nice system idle iowait irq softirq steal
    return sum(values) - values[3] - values[4]


def _own_ticks() -> int:
    """This process's user and system clock ticks so far (/proc/self/stat's 14th and 15th fields)."""
    with open("/proc/self/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def huge_pages(command: list[str]) -> str | None:
    """THP_MEM_ALLOC_ENABLE for `command`: "1" when it trains, else None (torch's default: off).

    With it torch asks the kernel for transparent huge pages (2 MB) for each CPU buffer of 2 MB or more, where
    the kernel's THP mode is `madvise` or `always`. A CPU training step multiplies tens of MB of activations:
    with 2 MB pages the protocol model's updates took 2-3% less time, in five paired runs of 40 and 100 updates
    (docs/benchmarks.md, "Training against fairseq"). Decoding preallocates key and value caches that it fills in part,
    and 2 MB pages would back all of it: beam search of the dev set was slower, so decoding leaves it off."""
    return "1" if is_one_of(command, TRAINING_COMMANDS) else None


def kernel_cache_capacity(command: list[str]) -> str | None:
    """The capacity of the two caches of oneDNN kernels for `command`: 64 for `mt serve` (None elsewhere: 1,024
    each). It goes in ONEDNN_PRIMITIVE_CACHE_CAPACITY (oneDNN's cache of built kernels) and LRU_CACHE_CAPACITY
    (the cache of kernel descriptions that torch's ideep layer keeps in front of it).

    Both are keyed by matrix shape, and a server's refilled batches make a new row count at almost every step
    (mt/model/kernels.py sends 160 rows or more to oneDNN), so both fill to their capacity and hold that memory for
    good: about 0.25 MB an entry each. One linear layer run at 400 row counts kept 222 MB more live memory
    with the defaults, 117 MB with oneDNN's cache at 64 alone, 26 MB with both at 64; with both, the demo
    checkpoint's server no longer climbs round after round of 128 clients (docs/serving.md)."""
    return "64" if is_one_of(command, (["serve"],)) else None


M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # mallopt's parameter numbers (glibc's malloc.h)


def keep_freed_memory() -> bool:
    """Let glibc's malloc keep freed memory for the next allocation instead of handing it back to the system.

    A CPU training step makes the same large tensors every update (the logits alone are batch x vocabulary
    floats: 110 MB for the protocol model). glibc serves each block over 32 MB with its own mmap and unmaps it
    when freed, so the next update faults every page back in, zeroed by the kernel; it also trims the heap's
    free top after every large free. With no mmap and no trimming the memory is reused: 8-10% more target
    tokens/s for the protocol model (docs/benchmarks.md); decoding's refilled batches make tensors of tens of MB
    every step too. The process keeps its peak memory until it exits, or for `mt serve` until it is idle
    (`return_freed_memory`). False (and nothing changes) where the C library is not glibc."""
    libc = glibc()
    return libc is not None and bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, 2 ** 31 - 1))


def return_freed_memory() -> bool:
    """Hand the memory malloc holds free back to the system now (glibc's malloc_trim(0), every arena): the
    counterpart of `keep_freed_memory` for a long-running process that has gone idle. The demo checkpoint's
    server, after 10 s of 32 clients sending 20-sentence requests: 1.2-1.4 GB resident, 0.9 GB once handed back.
    False (and nothing done) where the C library is not glibc."""
    libc = glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


@functools.cache
def glibc() -> ctypes.CDLL | None:
    """The process's C library where it is glibc (it has mallopt, malloc_trim and gnu_get_libc_version), else
    None. Looked up once: find_library runs `ldconfig -p` in a subprocess (1.5 ms), and the server trims every
    time it goes idle."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    libc = ctypes.CDLL(libc_name)
    is_glibc = all(hasattr(libc, name) for name in ("mallopt", "malloc_trim", "gnu_get_libc_version"))
    return libc if is_glibc else None


def attention_without_cudnn() -> None:
    """Keep SDPA off its cuDNN kernel on CUDA; it picks flash or memory-efficient attention instead.

    cuDNN attention (torch's first choice for bf16/fp16 on an H100) builds a plan for every new shape: 420-630 ms
    at the first call of a shape against 1.1 ms without it (H100, torch 2.11). Training batches and greedy decoding
    make new shapes all the time: transformer-base's first 60 updates on DDTP took 87 s with it and 26 s without,
    and a dev evaluation 37.5 s against 2.5 s, with the same losses (docs/benchmarks.md, "On a GPU")."""
    import torch  # here, after the environment variables: torch reads them when it loads

    torch.backends.cuda.enable_cudnn_sdp(False)


def tune_process(args: list[str]) -> dict[str, str]:
    """Tune this process for the command `mt ARGS` (sys.argv[1:]), before torch is imported, and return what was
    set, name -> value. Environment variables the user set win and are left out of the result. The commands that
    run a model first sample the machine's load (`other_load`, 0.1 s; in the result as `other_load`); every
    command: GOMP_SPINCOUNT (`openmp_spin_count`); training (`mt train`, `mt bench train`): THP_MEM_ALLOC_ENABLE
    and SDPA without cuDNN (this imports torch); `mt serve`: ONEDNN_PRIMITIVE_CACHE_CAPACITY and
    LRU_CACHE_CAPACITY; the commands that run a model: glibc's malloc keeps freed memory."""
    command, done = command_of(args), {}
    load = other_load() if is_one_of(command, LOAD_COMMANDS) and "GOMP_SPINCOUNT" not in os.environ else None
    if load is not None:
        done["other_load"] = f"{load:.1f} of {os.cpu_count()} cores"
    for name, value in (("GOMP_SPINCOUNT", openmp_spin_count(command, load)),
                        ("THP_MEM_ALLOC_ENABLE", huge_pages(command)),
                        ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", kernel_cache_capacity(command)),
                        ("LRU_CACHE_CAPACITY", kernel_cache_capacity(command))):
        if value is not None and name not in os.environ:
            os.environ[name] = done[name] = value
    if is_one_of(command, MODEL_COMMANDS) and keep_freed_memory():
        done["malloc"] = "keep freed memory (M_MMAP_MAX=0, M_TRIM_THRESHOLD=2^31-1)"
    if is_one_of(command, TRAINING_COMMANDS):
        attention_without_cudnn()
        done["cudnn_attention"] = "off"
    return done


def describe(done: dict[str, str]) -> str:
    """One line for stderr: `tuning: GOMP_SPINCOUNT=30000, malloc=...` (or `tuning: nothing set`)."""
    return "tuning: " + (", ".join(f"{name}={value}" for name, value in done.items()) or "nothing set")
