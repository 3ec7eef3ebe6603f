"""Learning per update against fairseq: the same model trained for the same number of updates, then scored.

    python scripts/equal_updates.py --fairseq-venv VENV [--updates 800] [--warmup 400] [--seeds 1,2,3]
        [--threads 2] [--report-at 50,200,350,400,600,800] [--only mt|fairseq] [--work runs/equal-updates]

The model and data are those of scripts/bench_train.py (3+3 layers, d_model 256, FFN 1024, 4 heads, tied
embeddings, post-LN, dropout 0.1, label smoothing 0.1, Adam (0.9, 0.98, 1e-9), linear warm-up to 1e-3 then
inverse square root, 4,096-token batches, fp32, on the shipped DDTP de-en corpus with mt's joint 8,000-piece
BPE; fairseq gets the very same pairs as pieces). For each seed, fairseq and then mt train `--updates` updates
from scratch in a fresh process each; each then decodes the 883 dev sentences with beam 4, alpha 0.6 and a
length limit of source + 50 (fairseq-interactive; `mt translate`), and sacrebleu scores the detokenized
output against the raw references. Printed: the training loss in nats at the `--report-at` updates (the mean
over the 50 updates before each; fairseq logs bits, multiplied by ln 2), dev BLEU and chrF per run, and each
toolkit's mean and sample standard deviation over the seeds. The results are also written as JSON to
WORK/results.json. Three seeds of 800 updates take about 75 minutes on 2 cores per toolkit.

fairseq 0.12.3 is installed as docs/benchmarks.md ("Installing fairseq") and scripts/bench_train.py say. Without
`--fairseq-venv` (or with `--only mt`) only mt's runs happen.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_train  # noqa: E402  (the shared model, data and log readers)

ROOT = bench_train.ROOT
DEV_SRC, DEV_REF = bench_train.DATA / "dev.de", bench_train.DATA / "dev.en"
LOG_EVERY = 50  # both toolkits log the mean loss of the last 50 updates
BEAM, ALPHA, MAX_LEN_A, MAX_LEN_B = 4, 0.6, 1, 50


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fairseq-venv", type=Path, default=os.environ.get("FAIRSEQ_VENV"),
                        help="a virtual environment with fairseq (default: $FAIRSEQ_VENV)")
    parser.add_argument("--updates", type=int, default=800)
    parser.add_argument("--warmup", type=int, default=400, help="warm-up updates of both schedules")
    parser.add_argument("--seeds", default="1,2,3", help="comma-separated training seeds")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--report-at", default="50,200,350,400,600,800",
                        help="updates (multiples of 50) whose training loss the table shows")
    parser.add_argument("--only", choices=["mt", "fairseq"], help="run one toolkit only")
    parser.add_argument("--work", type=Path, default=ROOT / "runs/equal-updates")
    args = parser.parse_args(argv)
    args.seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    args.report_at = [int(u) for u in args.report_at.split(",") if u.strip() and int(u) <= args.updates]
    if any(u % LOG_EVERY for u in args.report_at):
        parser.error(f"--report-at: every update must be a multiple of {LOG_EVERY}")
    if args.only == "fairseq" and args.fairseq_venv is None:
        parser.error("--only fairseq needs --fairseq-venv")
    if args.fairseq_venv is not None and not (args.fairseq_venv / "bin/fairseq-train").exists():
        parser.error(f"--fairseq-venv {args.fairseq_venv}: no bin/fairseq-train there")
    return args


def toolkits(args: argparse.Namespace) -> list[str]:
    if args.only:
        return [args.only]
    return (["fairseq"] if args.fairseq_venv is not None else []) + ["mt"]


def score(hypotheses: list[str], references: list[str]) -> dict:
    import sacrebleu

    return {"bleu": round(sacrebleu.corpus_bleu(hypotheses, [references]).score, 2),
            "chrf": round(sacrebleu.corpus_chrf(hypotheses, [references]).score, 2)}


def train_and_score_mt(config: Path, work: Path, seed: int, env: dict) -> dict:
    """`mt train` with this seed in its own output_dir, then `mt translate` of the dev set, scored."""
    out = work / f"mt-seed{seed}"
    shutil.rmtree(out, ignore_errors=True)
    sets = ["--set", f"output_dir={out}", "--set", f"train.seed={seed}", "--set", "train.save_every=1000000"]
    mt = [sys.executable, "-m", "mt"]
    bench_train.run(mt + ["prepare", str(config)] + sets, work / f"mt-seed{seed}-prepare.log", env)
    train_s = bench_train.run(mt + ["train", str(config)] + sets, work / f"mt-seed{seed}-train.log", env)
    hyp = work / f"mt-seed{seed}.hyp"
    decode_s = bench_train.run(mt + ["translate", "-c", str(out / "checkpoint_last.pt"), "-i", str(DEV_SRC),
                                     "-o", str(hyp), "--beam-size", str(BEAM), "--alpha", str(ALPHA),
                                     "--max-len-a", str(MAX_LEN_A), "--max-len-b", str(MAX_LEN_B)],
                               work / f"mt-seed{seed}-translate.log", env)
    return {"windows": bench_train.mt_windows(out / "metrics.jsonl"), "train_s": train_s, "decode_s": decode_s,
            **score(read_lines(hyp), read_lines(DEV_REF))}


def train_and_score_fairseq(config: Path, work: Path, venv: Path, args: argparse.Namespace, seed: int,
                            env: dict) -> dict:
    """fairseq-train with this seed, then fairseq-interactive on the dev set's pieces, detokenized and scored."""
    save_dir = work / f"fairseq-seed{seed}"
    shutil.rmtree(save_dir, ignore_errors=True)
    command = fairseq_train_command(venv, work, args, seed, save_dir)
    env = {**env, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}  # fairseq 0.12 loads pickled checkpoints
    log = work / f"fairseq-seed{seed}-train.log"
    train_s = bench_train.run(command, log, env)
    tok = source_tokenizer(config)
    pieces = work / "dev.pieces"
    pieces.write_text("".join(" ".join(tok.sp.encode(line, out_type=str)) + "\n"
                              for line in read_lines(DEV_SRC)), encoding="utf-8")
    out = work / f"fairseq-seed{seed}.out"
    decode_s = bench_train.run(
        [str(venv / "bin/fairseq-interactive"), str(work / "fairseq-bin"), "--path",
         str(save_dir / "checkpoint_last.pt"), "--source-lang", "src", "--target-lang", "tgt", "--input",
         str(pieces), "--buffer-size", "1000", "--batch-size", "32", "--required-batch-size-multiple", "1",
         "--beam", str(BEAM), "--lenpen", str(ALPHA), "--max-len-a", str(MAX_LEN_A), "--max-len-b",
         str(MAX_LEN_B), "--cpu"], out, env)
    hypotheses = fairseq_hypotheses(out.read_text(encoding="utf-8"), tok)
    return {"windows": bench_train.fairseq_windows(log), "train_s": train_s, "decode_s": decode_s,
            **score(hypotheses, read_lines(DEV_REF))}


def fairseq_train_command(venv: Path, work: Path, args: argparse.Namespace, seed: int, save_dir: Path) -> list[str]:
    """bench_train's fairseq-train command with this seed, saving the last checkpoint (to decode) in save_dir."""
    command = bench_train.fairseq_command(venv, work, args.updates, args.warmup, LOG_EVERY)
    command = [c for c in command if c != "--no-save"]
    command[command.index("--seed") + 1] = str(seed)
    command[command.index("--save-dir") + 1] = str(save_dir)
    return command + ["--no-epoch-checkpoints"]


def fairseq_hypotheses(output: str, tok) -> list[str]:
    """fairseq-interactive's `H-<line>\\t<score>\\t<pieces>` lines, in input order, as detokenized text."""
    found = {}
    for line in output.splitlines():
        if line.startswith("H-"):
            index, _, text = line[2:].split("\t", 2)
            found[int(index)] = tok.sp.decode_pieces(text.split())
    return [found.get(i, "") for i in range(max(found, default=-1) + 1)]


def source_tokenizer(config: Path):
    from mt.config import load_config
    from mt.data.prepare import load_prepared

    return load_prepared(load_config(config)).src_tokenizer  # joint: the same model on both sides


def read_lines(path: Path) -> list[str]:
    return [line.rstrip("\n") for line in path.read_text(encoding="utf-8").splitlines()]


def loss_at(windows: list[dict], update: int) -> float:
    return next((w["loss"] for w in windows if w["update"] == update), float("nan"))


def report(results: dict[str, dict[int, dict]], args: argparse.Namespace) -> None:
    print(f"protocol model, {args.updates} updates, warm-up {args.warmup}, CPU, {args.threads} threads; "
          f"loss in nats (mean of the 50 updates before); dev set, beam {BEAM}, alpha {ALPHA}, sacrebleu")
    print("| " + " | ".join(["run", *(f"loss @{u}" for u in args.report_at), "dev BLEU", "chrF", "train s"]) + " |")
    print("|---|" + "---:|" * (len(args.report_at) + 3))
    for name, runs in results.items():
        for seed, r in runs.items():
            cells = [f"{name}, seed {seed}", *(f"{loss_at(r['windows'], u):.2f}" for u in args.report_at),
                     f"{r['bleu']:.2f}", f"{r['chrf']:.2f}", f"{r['train_s']:.0f}"]
            print("| " + " | ".join(cells) + " |")
    for name, runs in results.items():
        bleu = [r["bleu"] for r in runs.values()]
        spread = f" +- {statistics.stdev(bleu):.2f}" if len(bleu) > 1 else ""
        print(f"{name}: dev BLEU {statistics.mean(bleu):.2f}{spread} over seeds {', '.join(map(str, runs))}")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.fairseq_venv is None and args.only is None:
        print(f"fairseq is not installed: only mt runs. To compare, install it:\n{bench_train.INSTALL}\n"
              "then pass --fairseq-venv VENV.", file=sys.stderr)
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads),
           "PYTHONPATH": str(ROOT)}
    env.pop("GOMP_SPINCOUNT", None)  # each toolkit's own default
    venv = args.fairseq_venv if "fairseq" in toolkits(args) else None
    config = bench_train.prepare(args.work, venv, args.updates, args.warmup, LOG_EVERY)
    results: dict[str, dict[int, dict]] = {name: {} for name in toolkits(args)}
    started = time.perf_counter()
    for seed in args.seeds:
        for name in results:
            print(f"seed {seed}: {name} ({time.perf_counter() - started:.0f} s so far)", file=sys.stderr, flush=True)
            results[name][seed] = (train_and_score_fairseq(config, args.work, venv, args, seed, env)
                                   if name == "fairseq" else train_and_score_mt(config, args.work, seed, env))
    (args.work / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")
    report(results, args)


if __name__ == "__main__":
    main()
