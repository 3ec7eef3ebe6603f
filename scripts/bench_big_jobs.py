"""What progress, durable chunks and a second process cost or gain `mt translate` on a big file.

    python scripts/bench_big_jobs.py [--model runs/demo/checkpoint_best.pt] [--lines 20000] [--repeats 3]
                                     [--beam-size 1] [--out runs/bench-big-jobs]

The first --lines lines of the shipped German training side, translated by `make demo`'s model, three ways,
interleaved --repeats times on the same machine:

- plain: `-i FILE --quiet`, results to stdout (redirected to a file): no progress, nothing synced;
- durable: `-i FILE -o FILE`, progress lines on stderr and a synced chunk of 2,000 lines at a time, resumable;
- torchrun 2: `torchrun --nproc-per-node 2 -m mt translate -i FILE -o FILE`, one thread a process.

The first two run in one process with all the machine's threads. The order is reversed every other repeat, so
that a machine's drift falls on every way alike. It prints each run's seconds and the best of each way, checks
that all outputs are the same bytes, and writes results.json to --out.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "data" / "ddtp-de-en" / "train.de"


def ways(model: Path, source: Path, out: Path, beam: int) -> dict[str, tuple[list[str], Path | None, Path]]:
    """Each way's command, the file its stdout goes to (None: discarded), and the file its output is in."""
    common = ["-c", str(model), "-i", str(source), "--beam-size", str(beam)]
    mt = [sys.executable, "-m", "mt", "translate", *common]
    return {
        "plain": ([*mt, "--quiet"], out / "plain.en", out / "plain.en"),
        "durable": ([*mt, "-o", str(out / "durable.en")], None, out / "durable.en"),
        "torchrun 2": ([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "mt",
                        "translate", *common, "-o", str(out / "torchrun.en")], None, out / "torchrun.en"),
    }


def timed(command: list[str], stdout: Path | None) -> float:
    started = time.perf_counter()
    with open(stdout, "wb") if stdout else open("/dev/null", "wb") as f:
        subprocess.run(command, cwd=ROOT, stdout=f, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "demo" / "checkpoint_best.pt")
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--beam-size", type=int, default=1)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-big-jobs")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    source = args.out / "input.de"
    with open(SOURCE, encoding="utf-8") as f:
        source.write_text("".join(line for _, line in zip(range(args.lines), f)), encoding="utf-8")
    runs = ways(args.model, source, args.out, args.beam_size)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, bytes] = {}
    for repeat in range(args.repeats):
        order = list(runs.items()) if repeat % 2 == 0 else list(runs.items())[::-1]  # drift falls on each way
        for name, (command, stdout, written) in order:
            for stale in args.out.glob("*.en*"):
                stale.unlink()  # a fresh run each time, never a resumed one
            seconds[name].append(timed(command, stdout))
            outputs[name] = written.read_bytes()
            print(f"run {repeat + 1} {name}: {seconds[name][-1]:.1f} s", flush=True)
    same = len(set(outputs.values())) == 1
    best = {name: min(s) for name, s in seconds.items()}
    results = {"lines": args.lines, "beam_size": args.beam_size, "seconds": seconds, "best_s": best,
               "lines_per_s": {n: round(args.lines / s, 1) for n, s in best.items()},
               "durable_cost_pct": round(100 * (best["durable"] / best["plain"] - 1), 1),
               "torchrun_vs_one_pct": round(100 * (best["torchrun 2"] / best["durable"] - 1), 1),
               "outputs_identical": same}
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    for name, s in best.items():
        print(f"{name}: best {s:.1f} s, {args.lines / s:,.0f} lines/s")
    print(f"progress and durable chunks: {results['durable_cost_pct']:+.1f}% time against plain; "
          f"torchrun 2 processes: {results['torchrun_vs_one_pct']:+.1f}% against one; outputs identical: {same}")


if __name__ == "__main__":
    main()
