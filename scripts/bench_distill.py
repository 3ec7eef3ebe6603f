"""Distillation benchmark on the shipped corpus: a teacher, a student of configs/student-tiny.yaml's depths
distilled from it with `mt distill`, and the same student trained for the same updates on the references, all
scored on a held-out split of the training corpus that none of them trained on.

    python scripts/bench_distill.py [--work runs/bench-distill] [--steps split,teacher,baseline,distill,score,speed,serve]
        [--teacher-steps 6000] [--student-steps 3000] [--held-out 1000] [--set-teacher model.d_model=512 ...]
        [--set-student model.norm=pre ...]

Steps (mt train and mt distill resume where they stopped: a killed benchmark is started again with the same
command, or with --steps from the step it stopped in):
  split     the last --held-out pairs of data/ddtp-de-en/train.{de,en} set aside (held-out.*), the rest (or
            the first --train-pairs of it) train.*
  teacher   configs/demo.yaml at the teacher's shape (--teacher-*; default 4+4 layers, d 256, ff 1024), then
            its last --average checkpoints averaged (teacher.pt)
  baseline  the student (configs/student-tiny.yaml's model, with --set-student) trained --student-steps on the
            references
  distill   `mt distill` of the same student, same updates, from teacher.pt (beam 4, filter_worst, keep_original)
  score     held-out BLEU, beam 4, of the teacher, the baseline, the distilled student and its int8 export
  speed     held-out sentences/s: the teacher's fp32 checkpoint with mt against the student's int8 export with
            CTranslate2 (beam 4, --threads threads), interleaved (teacher, student, teacher, student)
  serve     scripts/bench_serve.py: `mt serve` of the student's export (mt-export) against LibreTranslate serving
            the teacher's export, 32 one-sentence clients (needs --ltvenv, as bench_serve)
Every figure and each step's wall time is printed and kept in WORK/results.json. The targets of the issue: the
distilled student 1.0 BLEU above the baseline and within 1.0 of the teacher; its export 5x the teacher's
decoding speed; `mt serve` of it 3x LibreTranslate serving the teacher.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data" / "ddtp-de-en"
MT = [sys.executable, "-m", "mt"]
STEPS = ("split", "teacher", "baseline", "distill", "score", "speed", "serve")


def run(*args, **kwargs) -> subprocess.CompletedProcess:
    print("$", " ".join(map(str, args)), file=sys.stderr, flush=True)
    return subprocess.run([str(a) for a in args], check=True, cwd=ROOT, text=True, **kwargs)


def sets(values: dict) -> list[str]:
    return [a for key, value in values.items() for a in ("--set", f"{key}={value}")]


def more_sets(items: list[str]) -> list[str]:
    """--set-teacher / --set-student's `section.key=value` items as mt's --set arguments."""
    return [x for item in items for x in ("--set", item)]


def split(work: Path, held_out: int, train_pairs: int, dev_lines: int) -> dict:
    """The last `held_out` pairs set aside; of the others, the first `train_pairs` (0: all) to train on; the
    first `dev_lines` (0: all) of the dev set for training's evaluations and `mt distill`'s comparison."""
    for side in ("de", "en"):
        lines = (DATA / f"train.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        train = lines[:-held_out][:train_pairs or None]
        (work / f"train.{side}").write_text("".join(train), encoding="utf-8")
        (work / f"held-out.{side}").write_text("".join(lines[-held_out:]), encoding="utf-8")
        dev = (DATA / f"dev.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        (work / f"dev.{side}").write_text("".join(dev[:dev_lines or None]), encoding="utf-8")
    return {"train_pairs": len(train), "held_out_pairs": held_out}


def data_sets(work: Path) -> dict:
    return {"data.train_src": work / "train.de", "data.train_tgt": work / "train.en",
            "data.dev_src": work / "dev.de", "data.dev_tgt": work / "dev.en"}


def teacher(work: Path, a) -> dict:
    shape = {"model.d_model": a.teacher_d_model, "model.d_ff": a.teacher_d_ff, "model.n_layers": a.teacher_layers,
             "train.max_steps": a.teacher_steps, "train.warmup_steps": min(4000, a.teacher_steps // 3),
             "train.save_every": max(1, a.teacher_steps // 10),
             "train.eval_every": max(1, a.teacher_steps // a.evals),
             "train.keep_last": a.average, "output_dir": work / "teacher"}
    run(*MT, "train", "configs/demo.yaml", *sets({**data_sets(work), **shape}),
        *more_sets(a.set_teacher))
    run(*MT, "average", "--last", a.average, work / "teacher", "-o", work / "teacher.pt")
    return {"shape": {k: str(v) for k, v in shape.items() if k.startswith("model.")}, "updates": a.teacher_steps,
            "averaged": a.average}


def student_sets(work: Path, a, name: str) -> list[str]:
    return sets({**data_sets(work), "train.max_steps": a.student_steps, "output_dir": work / name,
                 "train.save_every": max(1, a.student_steps // 4),
                 "train.eval_every": max(1, a.student_steps // a.evals),
                 "train.warmup_steps": min(400, a.student_steps // 3)}) + more_sets(a.set_student)


def baseline(work: Path, a) -> dict:
    run(*MT, "train", "configs/student-tiny.yaml", *student_sets(work, a, "baseline"))
    return {"updates": a.student_steps}


def distill(work: Path, a) -> dict:
    run(*MT, "distill", "configs/student-tiny.yaml", *student_sets(work, a, "student"),
        *sets({"distill.teachers": f"[{work / 'teacher.pt'}]", "distill.filter_worst": a.filter_worst,
               "distill.keep_original": a.keep_original}))
    return json.loads((work / "student" / "distilled" / "filter.json").read_text())


def bleu(model: Path, work: Path, device: str) -> float:
    out = run(*MT, "evaluate", "-c", model, "--src", work / "held-out.de", "--ref", work / "held-out.en",
              "--metrics", "bleu", "--json", "--beam-size", "4", "--device", device, capture_output=True).stdout
    return json.loads(out)["bleu"]["score"]


def score(work: Path, a) -> dict:
    models = {"teacher": work / "teacher.pt", "baseline": work / "baseline" / "checkpoint_best.pt",
              "distilled": work / "student" / "checkpoint_best.pt",
              "distilled int8": work / "student" / "student-ct2-int8"}
    return {name: bleu(path, work, "cpu" if path.is_dir() else a.device) for name, path in models.items()}


def speed(work: Path, a) -> dict:
    """Sentences/s over the held-out sources, interleaved, each timed whole (load included) less a one-line run."""
    sources = work / "held-out.de"
    one = work / "one.de"
    one.write_text(sources.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    n = len(sources.read_text(encoding="utf-8").splitlines())
    env = {**os.environ, "OMP_NUM_THREADS": str(a.threads)}
    models = {"teacher fp32 (mt)": work / "teacher.pt", "student int8 (CTranslate2)": work / "student" /
              "student-ct2-int8"}
    rates: dict[str, list[float]] = {name: [] for name in models}
    for _ in range(a.rounds):
        for name, model in models.items():
            times = []
            for path in (one, sources):
                start = time.perf_counter()
                run(*MT, "translate", "-c", model, "-i", path, "-o", work / "speed.out", "--beam-size", "4",
                    "--device", "cpu", env=env)
                times.append(time.perf_counter() - start)
            rates[name].append(round((n - 1) / (times[1] - times[0]), 1))
    teacher_rate, student_rate = (max(r) for r in rates.values())
    return {"rates": rates, "threads": a.threads, "speedup": round(student_rate / teacher_rate, 2)}


def serve(work: Path, a) -> dict:
    rows = {}
    for name, model, server in (("student export, mt serve", work / "student" / "checkpoint_best.pt", "mt-export"),
                                ("teacher export, LibreTranslate", work / "teacher.pt", "libretranslate")):
        out = run(sys.executable, "scripts/bench_serve.py", "--model", model, "--servers", server,
                  "--concurrency", "32", "--kinds", "sentence", "--seconds", a.serve_seconds, "--ltvenv", a.ltvenv,
                  "--json", "--work", work / f"serve-{server}", capture_output=True).stdout
        found = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        rows[name] = next(r["sentences_per_s"] for r in found if r.get("server") == server)
    rates = list(rows.values())
    return {**rows, "ratio": round(rates[0] / rates[1], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="runs/bench-distill")
    ap.add_argument("--steps", default=",".join(STEPS), help=f"some of {','.join(STEPS)}")
    ap.add_argument("--held-out", type=int, default=1000)
    ap.add_argument("--dev-lines", type=int, default=0, help="the first N dev lines only (0: all)")
    ap.add_argument("--evals", type=int, default=4, help="dev evaluations per training run")
    ap.add_argument("--train-pairs", type=int, default=0, help="train on the first N pairs only (0: all)")
    ap.add_argument("--teacher-steps", type=int, default=6000)
    ap.add_argument("--teacher-layers", type=int, default=4)
    ap.add_argument("--teacher-d-model", type=int, default=256)
    ap.add_argument("--teacher-d-ff", type=int, default=1024)
    ap.add_argument("--average", type=int, default=4, help="the teacher's last checkpoints averaged")
    ap.add_argument("--set-teacher", nargs="*", default=[], help="more --set arguments for the teacher")
    ap.add_argument("--student-steps", type=int, default=3000)
    ap.add_argument("--set-student", nargs="*", default=[],
                    help="more --set arguments for both students (the baseline and the distilled one)")
    ap.add_argument("--filter-worst", type=float, default=0.05)
    ap.add_argument("--keep-original", default="false", choices=["true", "false"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2, help="CPU threads when timing decoding")
    ap.add_argument("--rounds", type=int, default=2, help="interleaved speed rounds")
    ap.add_argument("--serve-seconds", type=float, default=15.0)
    ap.add_argument("--ltvenv", default="/tmp/ltvenv", help="virtual environment with libretranslate")
    a = ap.parse_args()
    work = (ROOT / a.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    results_path = work / "results.json"
    results = json.loads(results_path.read_text()) if results_path.exists() else {}
    steps = {"split": lambda: split(work, a.held_out, a.train_pairs, a.dev_lines), "teacher": lambda: teacher(work, a),
             "baseline": lambda: baseline(work, a), "distill": lambda: distill(work, a),
             "score": lambda: score(work, a), "speed": lambda: speed(work, a), "serve": lambda: serve(work, a)}
    for name in a.steps.split(","):
        if name not in steps:
            sys.exit(f"--steps: unknown step {name!r} (choose from {', '.join(STEPS)})")
        start = time.perf_counter()
        figures = steps[name]()
        results[name] = {**figures, "wall_s": round(time.perf_counter() - start, 1)}
        print(json.dumps({name: results[name]}), flush=True)
        results_path.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
