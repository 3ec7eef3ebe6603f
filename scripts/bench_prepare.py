"""`mt prepare` at scale: time and peak memory on N copies of the shipped DDTP corpus, and a trainer's memory.

    python scripts/bench_prepare.py --copies 25 [--project DIR ...] [--nproc 2] [--json]

Builds an N-fold copy of data/ddtp-de-en/train.{de,en} in a temporary folder (42,840 pairs a copy), then for
each checkout given with --project (default: this one; give an old one, e.g. made with `git worktree add
/tmp/old OLD_COMMIT`, to compare before and after in the same run) runs, each in a fresh process:

- `mt prepare` with configs/demo.yaml's tokenizer (bpe, vocab 4000, joint, max_sentences 2M) and max_len 128;
- `mt train` for 20 steps of the demo model on that cache, then its evaluation on 100 dev pairs (under
  torch.distributed.run with --nproc > 1).

Peak RSS is the kernel's high-water mark of each process (wait4's ru_maxrss; /proc VmHWM for each rank).
Page-cache pages of a memory-mapped corpus count in it once a process touches them (shared across processes,
but each process counts them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "ddtp-de-en"


def build_corpus(folder: Path, copies: int) -> int:
    """train.de / train.en repeated `copies` times, and the first 100 dev pairs; returns the number of pairs."""
    for lang in ("de", "en"):
        text = (DATA / f"train.{lang}").read_bytes()
        with open(folder / f"train.{lang}", "wb") as f:
            for _ in range(copies):
                f.write(text)
        dev = (DATA / f"dev.{lang}").read_bytes().splitlines(keepends=True)[:100]
        (folder / f"dev.{lang}").write_bytes(b"".join(dev))
    return copies * (DATA / "train.de").read_bytes().count(b"\n")


def mt_args(command: str, out: Path, corpus: Path, extra: list[str]) -> list[str]:
    settings = {"output_dir": out, "data.train_src": corpus / "train.de", "data.train_tgt": corpus / "train.en",
                "data.dev_src": corpus / "dev.de", "data.dev_tgt": corpus / "dev.en",
                "train.max_steps": 20, "train.log_every": 10, "train.eval_every": 1000, "train.save_every": 1000,
                # the evaluation after the last step decodes the dev set: keep an untrained model's outputs short
                "decode.max_len_a": 0, "decode.max_len_b": 5}
    args = ["-m", "mt", command, str(ROOT / "configs" / "demo.yaml")]
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    for setting in extra:
        args += ["--set", setting]
    return args


def _children(pid: int) -> list[int]:
    """All descendants of `pid`, from /proc."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [pid]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _rank_peaks(pid: int, peaks: dict) -> None:
    """Record the VmHWM (peak RSS, MiB) of each `mt train` rank below `pid`, keyed by its RANK."""
    for child in _children(pid):
        try:
            env = dict(e.split("=", 1) for e in Path(f"/proc/{child}/environ").read_text().split("\0") if "=" in e)
            status = Path(f"/proc/{child}/status").read_text()
        except OSError:
            continue
        if "RANK" in env and "mt" in Path(f"/proc/{child}/cmdline").read_text():
            hwm = int(next(line for line in status.splitlines() if line.startswith("VmHWM")).split()[1]) / 1024
            peaks[int(env["RANK"])] = max(peaks.get(int(env["RANK"]), 0), hwm)


def run_measured(args: list[str], cwd: Path, log: Path, ranks: bool = False) -> dict:
    """Run python ARGS in `cwd`; returns seconds, peak RSS (MiB) and, with `ranks`, each rank's peak."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, *args], cwd=cwd, stdout=out, stderr=subprocess.STDOUT, env=env)
        peaks: dict[int, float] = {}
        while True:  # wait4, not proc.poll(): it reaps the child and keeps its rusage
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG if ranks else 0)
            if pid:
                break
            _rank_peaks(proc.pid, peaks)
            time.sleep(0.2)
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed: python {' '.join(args)} (in {cwd}); its output is in {log}:\n"
                         + "\n".join(log.read_text().splitlines()[-15:]))
    result = {"seconds": seconds, "peak_mib": usage.ru_maxrss / 1024}
    if ranks:
        result["rank_peak_mib"] = [round(peaks[r]) for r in sorted(peaks)]
    return result


def bench(project: Path, name: str, corpus: Path, pairs: int, args, prepared: Path | None = None) -> dict:
    """Prepare and train with `project`'s mt; given `prepared` (another run's data folder), train on a copy of it."""
    out = corpus / f"run-{name}"
    if prepared is None:
        prepare = run_measured(mt_args("prepare", out, corpus, args.set), project, corpus / f"{name}-prepare.log")
    else:
        out.mkdir()
        shutil.copytree(prepared, out / "data")
        prepare = None
    if prepare:
        print(f"{project}: prepare {prepare['seconds']:.1f} s, peak RSS {prepare['peak_mib']:.0f} MiB", file=sys.stderr)
    train_args = mt_args("train", out, corpus, args.set)
    if args.nproc > 1:
        train_args = ["-m", "torch.distributed.run", "--nproc_per_node", str(args.nproc), *train_args]
    train = run_measured(train_args, project, corpus / f"{name}-train.log", ranks=args.nproc > 1)
    if args.prepare_once and prepared is None:
        shutil.copytree(out / "data", corpus / "prepared")
    shutil.rmtree(out, ignore_errors=True)
    measured = {"prepare_s": round(prepare["seconds"], 1), "pairs_per_s": round(pairs / prepare["seconds"]),
                "prepare_peak_mib": round(prepare["peak_mib"])} if prepare else \
        {"prepare_s": None, "pairs_per_s": None, "prepare_peak_mib": None}
    return {"project": str(project), "pairs": pairs, **measured,
            "train_s": round(train["seconds"], 1), "train_peak_mib": round(train["peak_mib"]),
            **({"train_rank_peak_mib": train["rank_peak_mib"]} if "rank_peak_mib" in train else {})}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=25, help="copies of the DDTP train set (42,840 pairs each)")
    parser.add_argument("--project", type=Path, action="append",
                        help="checkout whose `mt` to run (repeat to compare; default: this one)")
    parser.add_argument("--nproc", type=int, default=1, help="train under torch.distributed.run with N processes")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="passed to mt")
    parser.add_argument("--prepare-once", action="store_true",
                        help="prepare with the first --project only; the others train on a copy of its cache "
                             "(for checkouts whose prepare is the same, to compare training memory)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    projects = [p.resolve() for p in args.project or [ROOT]]
    with tempfile.TemporaryDirectory(prefix="bench-prepare-") as tmp:
        work = Path(tmp)
        pairs = build_corpus(work, args.copies)
        results = [bench(p, str(i), work, pairs, args,
                         work / "prepared" if args.prepare_once and i > 0 else None) for i, p in enumerate(projects)]
    if args.json:
        print(json.dumps({"copies": args.copies, "cpus": os.cpu_count(), "nproc": args.nproc, "results": results}))
        return
    print(f"{args.copies} copies of DDTP de-en, {pairs:,} pairs; {os.cpu_count()} CPUs")
    print("| project | pairs | prepare s | pairs/s | prepare peak RSS (MiB) | train 20 steps s | train peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        ranks = f" (ranks: {', '.join(map(str, r['train_rank_peak_mib']))})" if "train_rank_peak_mib" in r else ""
        made = f"{r['prepare_s']} | {r['pairs_per_s']:,} | {r['prepare_peak_mib']:,}" if r["prepare_s"] else "copied | | "
        print(f"| {r['project']} | {r['pairs']:,} | {made} "
              f"| {r['train_s']} | {r['train_peak_mib']:,}{ranks} |")


if __name__ == "__main__":
    main()
