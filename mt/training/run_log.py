"""The training log: metrics.jsonl read back as curves, and mirrored to TensorBoard when asked for.

metrics.jsonl holds one JSON object per line with "step" and "split" ("train" or "dev"); the other numbers
(loss, nll, ppl, lr, bleu, ...) depend on the split. See "What training writes" in the README. Training
appends a row at a time (`append_metrics`) and, when it resumes, drops the rows after its checkpoint
(`truncate_metrics`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from mt.errors import MtError
from mt.atomic_files import atomic_write_text


def read_metrics(run_dir: str | Path) -> list[dict]:
    """The rows of `run_dir/metrics.jsonl` in file order; a folder without rows is an MtError."""
    path = Path(run_dir) / "metrics.jsonl"
    if not Path(run_dir).is_dir():
        raise MtError(f"{run_dir}: no such folder")
    if not path.exists() or path.is_dir():  # a pipe is read as a file is
        raise MtError(f"{run_dir}: no metrics.jsonl (not a training output_dir, or training has not logged yet)")
    rows = []
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            if number == len(lines) and not text.endswith("\n"):  # cut off by a crash; dropped on resume
                continue
            raise MtError(f"{path}:{number}: not a JSON object ({e.msg})") from None
        if not isinstance(row, dict) or not isinstance(row.get("step"), int) or "split" not in row:
            raise MtError(f"{path}:{number}: a metrics row needs an integer 'step' and a 'split'")
        rows.append(row)
    if not rows:
        raise MtError(f"{path}: no metrics yet")
    return rows


def append_metrics(path: Path, row: dict) -> None:
    """`row` as one line of `path`, in one write; a line torn by a crash is dropped on resume
    (`truncate_metrics`). A failed write is an MtError naming the file."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, (json.dumps(row) + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as e:
        raise MtError(f"{path}: cannot append ({e.strerror})") from None


def truncate_metrics(path: Path, step: int, say) -> None:
    """Drop rows written after the checkpoint we resume from, so the log reads like one uninterrupted run, and
    a line a crash left half-written."""
    if not path.exists():
        return
    rows, torn = [], 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            torn += bool(line.strip())
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] <= step:
            rows.append(line)
    if torn:
        say(f"resume: dropped {torn} unreadable line(s) of {path} (written when a run was cut off)")
    try:
        atomic_write_text(path, "".join(r + "\n" for r in rows))
    except OSError as e:
        raise MtError(f"{path}: cannot rewrite it to resume ({e.strerror})") from None


def metric_curves(run_dir: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """{split: {"step": (N,), key: (N,), ...}} sorted by step, one point per step.

    A resumed run is one curve: train.py already drops rows after the checkpoint it resumes from, and if a
    step still appears twice the later row wins. A key missing from a row is NaN there.
    """
    latest: dict[str, dict[int, dict]] = {}
    for row in read_metrics(run_dir):
        latest.setdefault(row["split"], {})[row["step"]] = row
    curves = {}
    for split, by_step in latest.items():
        steps = sorted(by_step)
        keys = sorted({k for row in by_step.values() for k, v in row.items()
                       if k not in ("step", "split") and _is_number(v)})
        curves[split] = {"step": np.array(steps)}
        for key in keys:
            curves[split][key] = np.array([float(by_step[s].get(key, np.nan)) for s in steps])
    return curves


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class TensorBoardLog:
    """Writes each metrics row as TensorBoard scalars `split/key` (e.g. `train/loss`, `dev/bleu`) at its step.

    On resume from `step`, events logged after it are hidden (`purge_step`), as metrics.jsonl drops its rows.
    """

    def __init__(self, folder: str | Path, step: int = 0):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # torch raises this when the tensorboard package is missing
            raise MtError("train.tensorboard needs tensorboard: pip install 'mt[plot]'") from None
        self.writer = SummaryWriter(log_dir=str(folder), purge_step=step + 1 if step else None)

    def add(self, row: dict) -> None:
        for key, value in row.items():
            if key not in ("step", "split") and _is_number(value):
                self.writer.add_scalar(f"{row['split']}/{key}", value, row["step"])
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
