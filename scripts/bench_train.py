"""Training speed against fairseq: the same model, data and batches, trained in turns on this machine.

    python scripts/bench_train.py --fairseq-venv VENV [--updates 100] [--rounds 2] [--threads 2]
        [--variant 'old defaults: data.pad_to_multiple=8 GOMP_SPINCOUNT=30000']

The model is the protocol model of docs/benchmarks.md (scripts/equal_updates.py trains the same): 3+3 layers,
d_model 256, FFN 1024, 4 heads, tied embeddings, post-LN, dropout 0.1, label smoothing 0.1, Adam (0.9, 0.98,
1e-9), linear warm-up to 1e-3 then inverse square root, 4,096-token batches, fp32, seed 1, on the shipped DDTP
de-en corpus with a joint 8,000-piece BPE. `mt prepare` encodes it once; fairseq gets the very same pairs, written out as
pieces of mt's sentencepiece model, so both train on the same tokens.

Each round trains fairseq, then mt (then each `--variant`: mt with extra `--set` values and environment
variables; then `--baseline DIR`: mt from another checkout), each for `--updates` updates from scratch in a
fresh process, so that a slow spell of the machine hits every side. Printed per run: target tokens per second and seconds per update (means over the log
windows after the first, which holds start-up), the label-smoothed training loss at each log window in nats
(fairseq logs bits: multiplied by ln 2), and the wall time of the process. The last lines give mt's speed over
fairseq's per round and their median. Without fairseq the mt runs still happen, and the script says how to
install fairseq (about 10 minutes on 2 cores; docs/benchmarks.md, "Installing fairseq"):

    python3 -m venv VENV && . VENV/bin/activate
    pip install torch==2.13.0 cython 'numpy<2' cffi hydra-core==1.3.2 omegaconf==2.3.0 regex sacrebleu tqdm \\
        bitarray scikit-learn packaging sentencepiece
    pip install --no-deps torchaudio
    pip install --no-build-isolation --no-deps fairseq-fixed==0.12.3.1   # fairseq 0.12.2 fails on Python 3.11
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's mt, whichever one is installed
DATA = ROOT / "data/ddtp-de-en"
INSTALL = __doc__[__doc__.index("    python3 -m venv"):].rstrip()
BATCH_TOKENS, PEAK_LR, D_MODEL = 4096, 1e-3, 256


def mt_config(work: Path, updates: int, warmup: int, log_every: int) -> str:
    lr_scale = PEAK_LR / (D_MODEL ** -0.5 * warmup ** -0.5)  # mt's rate is the paper's times lr_scale
    return f"""output_dir: {work / 'mt'}
data: {{train_src: {DATA / 'train.de'}, train_tgt: {DATA / 'train.en'}, max_len: 126}}
tokenizer: {{type: bpe, vocab_size: 8000, joint: true}}
model: {{d_model: {D_MODEL}, d_ff: 1024, n_heads: 4, n_layers: 3, dropout: 0.1, norm: post, share_embeddings: true}}
train: {{max_steps: {updates}, batch_tokens: {BATCH_TOKENS}, warmup_steps: {warmup}, lr_scale: {lr_scale:.6f},
        label_smoothing: 0.1, log_every: {log_every}, eval_every: 1000000, save_every: 1000000, keep_last: 1,
        seed: 1, device: cpu, precision: fp32}}
"""


def fairseq_command(venv: Path, work: Path, updates: int, warmup: int, log_every: int) -> list[str]:
    return [str(venv / "bin/fairseq-train"), str(work / "fairseq-bin"), "--arch", "transformer", "--seed", "1",
            "--encoder-layers", "3", "--decoder-layers", "3", "--encoder-embed-dim", str(D_MODEL),
            "--decoder-embed-dim", str(D_MODEL), "--encoder-ffn-embed-dim", "1024", "--decoder-ffn-embed-dim", "1024",
            "--encoder-attention-heads", "4", "--decoder-attention-heads", "4", "--share-all-embeddings",
            "--dropout", "0.1", "--attention-dropout", "0.0", "--activation-dropout", "0.0",
            "--optimizer", "adam", "--adam-betas", "(0.9,0.98)", "--adam-eps", "1e-9", "--weight-decay", "0",
            "--clip-norm", "0", "--lr", str(PEAK_LR), "--lr-scheduler", "inverse_sqrt", "--warmup-updates",
            str(warmup), "--warmup-init-lr", "1e-7", "--criterion", "label_smoothed_cross_entropy",
            "--label-smoothing", "0.1", "--max-tokens", str(BATCH_TOKENS), "--required-batch-size-multiple", "1",
            "--max-source-positions", "1024", "--max-target-positions", "1024", "--max-update", str(updates),
            "--disable-validation", "--save-dir", str(work / "fairseq-ckpt"), "--no-save", "--cpu",
            "--num-workers", "0", "--log-format", "simple", "--log-interval", str(log_every)]


def prepare(work: Path, venv: Path | None, updates: int, warmup: int, log_every: int) -> Path:
    """mt's prepared data, and (with fairseq) the same pairs as pieces, binarized by fairseq-preprocess."""
    config = work / "mt.yaml"
    config.write_text(mt_config(work, updates, warmup, log_every), encoding="utf-8")
    run([sys.executable, "-m", "mt", "prepare", str(config)], work / "prepare.log")
    if venv is not None and not (work / "fairseq-bin").exists():
        from mt.config import load_config
        from mt.data.prepare import load_prepared

        data = load_prepared(load_config(config))
        tok = data.src_tokenizer  # joint: the same model on both sides
        pieces = [tok.sp.id_to_piece(i) for i in range(len(tok))]
        text = work / "fairseq-text"
        text.mkdir(exist_ok=True)
        for side, index in (("src", 0), ("tgt", 1)):
            lines = (" ".join(pieces[t] for t in data.train.pair(i)[index].tolist()) for i in range(len(data.train)))
            (text / f"train.{side}").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        (text / "dict.txt").write_text("".join(f"{p} 1\n" for p in pieces[4:]), encoding="utf-8")
        run([str(venv / "bin/fairseq-preprocess"), "--source-lang", "src", "--target-lang", "tgt", "--trainpref",
             str(text / "train"), "--srcdict", str(text / "dict.txt"), "--joined-dictionary", "--destdir",
             str(work / "fairseq-bin"), "--workers", "2"], work / "fairseq-preprocess.log")
    return config


def run(command: list[str], log: Path, env: dict | None = None, cwd: str | None = None) -> float:
    """Run `command` with its output in `log`; its wall time in seconds."""
    start = time.perf_counter()
    with open(log, "w", encoding="utf-8") as f:
        done = subprocess.run(command, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=cwd or ROOT, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:4])} ... failed (exit {done.returncode}); see {log}")
    return time.perf_counter() - start


def fairseq_windows(log: Path) -> list[dict]:
    """fairseq's train_inner lines: updates, target tokens/s (wps), seconds per update (1 / ups), loss in nats."""
    rows = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if "train_inner" not in line:
            continue
        fields = {k: float(v) for k, v in re.findall(r"(\w+)=([-\d.e+]+)", line)}
        ups = fields["ups"]  # 0 in the first window: fairseq starts its meters there
        rows.append({"update": int(fields["num_updates"]), "tokens_per_s": fields["wps"],
                     "seconds_per_update": 1.0 / ups if ups > 0 else math.nan, "loss": fields["loss"] * math.log(2)})
    return rows


def mt_windows(metrics: Path) -> list[dict]:
    rows = [json.loads(line) for line in metrics.read_text(encoding="utf-8").splitlines()]
    return [{"update": r["step"], "tokens_per_s": r["tokens_per_s"], "seconds_per_update": r.get("seconds_per_update", math.nan),
             "loss": r["loss"]} for r in rows if r.get("split") == "train"]


def train_fairseq(venv: Path, work: Path, args, env: dict, index: int) -> dict:
    shutil.rmtree(work / "fairseq-ckpt", ignore_errors=True)
    log = work / f"fairseq-{index}.log"
    wall = run(fairseq_command(venv, work, args.updates, args.warmup, args.log_every), log,
               {**env, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"})
    return {"wall_s": wall, "windows": fairseq_windows(log)}


def train_mt(config: Path, work: Path, sets: list[str], extra_env: dict, env: dict, name: str, index: int) -> dict:
    """`mt train` from this checkout, or from another one where `extra_env` has PYTHONPATH (`--baseline`)."""
    out = work / "mt"
    for old in [*out.glob("checkpoint*.pt"), out / "metrics.jsonl"]:
        old.unlink(missing_ok=True)
    command = [sys.executable, "-m", "mt", "train", str(config)] + [x for s in sets for x in ("--set", s)]
    wall = run(command, work / f"{_slug(name)}-{index}.log", {**env, **extra_env}, cwd=extra_env.get("PYTHONPATH"))
    return {"wall_s": wall, "windows": mt_windows(out / "metrics.jsonl")}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def parse_variant(text: str) -> tuple[str, list[str], dict]:
    """'name: section.key=value ENV_VAR=value ...' -> name, --set values, environment."""
    name, _, rest = text.partition(":")
    sets = [item for item in rest.split() if "." in item.split("=")[0]]
    env = dict(item.split("=", 1) for item in rest.split() if "." not in item.split("=")[0])
    return name.strip(), sets, env


def summary(result: dict) -> dict:
    steady = result["windows"][1:] or result["windows"]  # the first window holds start-up
    return {"tokens_per_s": statistics.mean(w["tokens_per_s"] for w in steady),
            "seconds_per_update": statistics.mean(w["seconds_per_update"] for w in steady),  # nan: an mt that did
            # not log it (before seconds_per_update was added)
            "losses": [round(w["loss"], 3) for w in result["windows"]], "wall_s": result["wall_s"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fairseq-venv", type=Path, default=os.environ.get("FAIRSEQ_VENV"),
                        help="a virtual environment with fairseq (default: $FAIRSEQ_VENV)")
    parser.add_argument("--updates", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=400, help="warm-up updates of both schedules")
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variant", action="append", default=[],
                        help="another mt run per round: 'name: section.key=value ENV=value ...'")
    parser.add_argument("--baseline", type=Path, help="another mt checkout (e.g. a git worktree of an older "
                        "commit) trained in turns with the others, at its own defaults")
    parser.add_argument("--work", type=Path, default=ROOT / "runs/bench-train")
    args = parser.parse_args()
    venv = args.fairseq_venv
    if venv is not None and not (Path(venv) / "bin/fairseq-train").exists():
        raise SystemExit(f"--fairseq-venv {venv}: no bin/fairseq-train there")
    if venv is None:
        print(f"fairseq is not installed: only mt runs. To compare, install it:\n{INSTALL}\n"
              "then pass --fairseq-venv VENV.", file=sys.stderr)
    args.work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads),
           "PYTHONPATH": str(ROOT)}
    env.pop("GOMP_SPINCOUNT", None)  # each side's own default, unless a variant sets it
    config = prepare(args.work, Path(venv) if venv else None, args.updates, args.warmup, args.log_every)
    sides = [("mt", [], {})] + [parse_variant(v) for v in args.variant]
    if args.baseline:
        sides.append((f"mt at {args.baseline.name}", [], {"PYTHONPATH": str(args.baseline.resolve())}))
    results: dict[str, list[dict]] = {name: [] for name in (["fairseq"] if venv else []) + [s[0] for s in sides]}
    for index in range(1, args.rounds + 1):
        if venv:
            print(f"round {index}/{args.rounds}: fairseq", file=sys.stderr, flush=True)
            results["fairseq"].append(summary(train_fairseq(Path(venv), args.work, args, env, index)))
        for name, sets, extra_env in sides:
            print(f"round {index}/{args.rounds}: {name}", file=sys.stderr, flush=True)
            results[name].append(summary(train_mt(config, args.work, sets, extra_env, env, name, index)))
    report(results, args)


def report(results: dict[str, list[dict]], args) -> None:
    print(f"protocol model, {args.updates} updates from scratch per run, CPU, {args.threads} threads, "
          f"{args.rounds} round(s) in turns; tokens/s and s/update: means over the log windows after the first")
    print(f"| round | toolkit | target tokens/s | s/update | wall s | loss (nats) at updates "
          f"{', '.join(str(u) for u in range(args.log_every, args.updates + 1, args.log_every))} |")
    print("|---|---|---:|---:|---:|---|")
    for index in range(args.rounds):
        for name, runs in results.items():
            r = runs[index]
            print(f"| {index + 1} | {name} | {r['tokens_per_s']:.0f} | {r['seconds_per_update']:.3f} | "
                  f"{r['wall_s']:.0f} | {' / '.join(f'{x:.3f}' for x in r['losses'])} |")
    if "fairseq" not in results:
        return
    for name, runs in results.items():
        if name == "fairseq":
            continue
        speed = [m["tokens_per_s"] / f["tokens_per_s"] for m, f in zip(runs, results["fairseq"])]
        time_ratio = [m["seconds_per_update"] / f["seconds_per_update"] for m, f in zip(runs, results["fairseq"])]
        print(f"{name}: target tokens/s over fairseq's {statistics.median(speed):.2f}x (per round "
              f"{', '.join(f'{x:.2f}' for x in speed)}); seconds per update over fairseq's "
              f"{statistics.median(time_ratio):.2f}x (per round {', '.join(f'{x:.2f}' for x in time_ratio)})")


if __name__ == "__main__":
    main()
