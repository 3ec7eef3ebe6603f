"""`mt distill` end to end on tiny models: a run killed during the bulk translation and again during training,
then resumed, gives the distilled corpus of an uninterrupted run line for line, and the same student; bad
inputs are one line."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from mt.checkpoint import load_checkpoint
from tests.conftest import DATA, ROOT, TINY, one_error_line, run_mt, tiny_overrides

CORPUS_LINES = 200


@pytest.fixture(scope="module")
def teacher(tmp_path_factory) -> Path:
    """A tiny German-English model, trained just enough to write sentences."""
    out = tmp_path_factory.mktemp("teacher")
    run_mt("train", TINY, *tiny_overrides(out, **{"train.max_steps": 30, "data.dev_src": "null",
                                                  "data.dev_tgt": "null"}))
    return out / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def student_config(teacher, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("student")
    for side in ("de", "en"):
        lines = (DATA / f"sample-2k.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        (folder / f"corpus.{side}").write_text("".join(lines[:CORPUS_LINES]), encoding="utf-8")
        dev = (DATA / f"dev.{side}").read_text(encoding="utf-8").splitlines(keepends=True)
        (folder / f"dev.{side}").write_text("".join(dev[:10]), encoding="utf-8")
    config = {
        "output_dir": str(folder / "run"),
        "data": {"train_src": str(folder / "corpus.de"), "train_tgt": str(folder / "corpus.en"),
                 "dev_src": str(folder / "dev.de"), "dev_tgt": str(folder / "dev.en"), "max_len": 64,
                 "pad_to_multiple": 1},
        "tokenizer": {"vocab_size": 400},
        "model": {"d_model": 32, "d_ff": 64, "n_heads": 4, "encoder_layers": 2, "decoder_layers": 1,
                  "max_positions": 128},
        "train": {"max_steps": 10, "batch_tokens": 1024, "warmup_steps": 5, "log_every": 5, "eval_every": 10,
                  "save_every": 5},
        "decode": {"max_len_a": 0.5, "max_len_b": 4},
        "distill": {"teachers": [str(teacher)], "beam_size": 2, "batch_lines": 40, "filter_worst": 0.1,
                    "keep_original": True},
    }
    (folder / "student.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    return folder / "student.yaml"


def _distill(config, out: Path, *sets, check=True):
    args = [a for s in (f"output_dir={out}", *sets) for a in ("--set", s)]
    return run_mt("distill", config, *args, check=check)


def _start(config, out: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "mt", "distill", str(config), "--set", f"output_dir={out}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _kill_when(proc: subprocess.Popen, ready) -> None:
    while not ready():
        assert proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.is_file() else 0


@pytest.fixture(scope="module")
def uninterrupted(student_config, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("through") / "run"
    _distill(student_config, out)
    return out


def test_a_run_killed_twice_and_resumed_distills_and_trains_as_one_that_ran_through(student_config, uninterrupted,
                                                                                  tmp_path):
    out = tmp_path / "run"
    partial = out / "distilled" / "translations.txt.partial"
    _kill_when(_start(student_config, out), lambda: _lines(partial) >= 80)  # during the bulk translation
    assert not (out / "distilled" / "translations.txt").exists()
    _kill_when(_start(student_config, out), lambda: (out / "checkpoint_5.pt").exists())  # during training
    assert not (out / "checkpoint_10.pt").exists()
    resumed = _distill(student_config, out)
    assert "translating skipped" in resumed.stderr and "resuming from" in resumed.stderr
    for name in ("translations.txt", "scores.txt", "kept.src", "kept.tgt", "filter.json"):
        through = (uninterrupted / "distilled" / name).read_text(encoding="utf-8")
        assert (out / "distilled" / name).read_text(encoding="utf-8") == through, name
    assert _lines(out / "distilled" / "translations.txt") == CORPUS_LINES
    assert _lines(out / "distilled" / "kept.src") == CORPUS_LINES - CORPUS_LINES // 10
    a, b = (load_checkpoint(run / "checkpoint_last.pt")["model"] for run in (uninterrupted, out))
    assert all(torch.equal(a[k], b[k]) for k in a)
    report = yaml.safe_load((out / "distill.json").read_text())
    assert {"teachers", "student fp32", "student int8"} <= report.keys()
    assert (out / "student-ct2-int8" / "model.bin").is_file()


def test_a_finished_run_skips_every_step(student_config, uninterrupted):
    again = _distill(student_config, uninterrupted)
    assert "translating skipped" in again.stderr and "filtering skipped" in again.stderr
    assert "comparison skipped" in again.stderr


def test_a_distilled_folder_of_other_settings_is_refused(student_config, uninterrupted):
    proc = _distill(student_config, uninterrupted, "distill.beam_size=3", check=False)
    assert one_error_line(proc) == (f"error: {uninterrupted / 'distilled'}: made by other decoding than this "
                                    "config's; never mixed: set them back to resume, or pass --restart to start "
                                    "over (the previous run is moved aside), or use another output_dir")


def test_teachers_of_another_direction_are_refused(student_config, tmp_path):
    folder = student_config.parent
    proc = _distill(student_config, tmp_path / "run", f"data.train_src={folder / 'corpus.en'}",
                    f"data.train_tgt={folder / 'corpus.de'}", check=False)
    line = one_error_line(proc)
    assert line.startswith("error: distill.teachers: they translate data.train_tgt into data.train_src better")
    assert not (tmp_path / "run" / "distilled").exists()


def test_teachers_of_different_vocabularies_are_refused(student_config, teacher, tmp_path):
    other = tmp_path / "other"
    run_mt("train", TINY, *tiny_overrides(other, **{"train.max_steps": 1, "tokenizer.vocab_size": 450,
                                                    "data.dev_src": "null", "data.dev_tgt": "null"}))
    proc = _distill(student_config, tmp_path / "run", f"distill.teachers=[{teacher}, {other}/checkpoint_last.pt]",
                    check=False)
    assert "its source vocabulary differs from" in one_error_line(proc)


@pytest.mark.parametrize("setting,message", [
    ("distill.teachers=[]", "error: distill.teachers: none given; mt distill needs at least one teacher (a "
                            "checkpoint, or a directory written by mt export)"),
    ("distill.teachers=[no-such.pt]", "error: distill.teachers: no-such.pt: no such file or directory"),
    ("data.train_src=no-such.de", "error: data.train_src: no such file 'no-such.de'"),
])
def test_bad_inputs_are_one_line(student_config, tmp_path, setting, message):
    proc = _distill(student_config, tmp_path / "run", setting, check=False)
    assert one_error_line(proc) == message and proc.returncode == 1


SHORT = ("distill.export=false", "train.max_steps=2")  # a run that stops after filtering and two updates


@pytest.fixture(scope="module")
def short_run(student_config, tmp_path_factory) -> Path:
    """A finished short run: refused, resumed and (last) restarted by the tests below."""
    out = tmp_path_factory.mktemp("short") / "run"
    _distill(student_config, out, *SHORT)
    return out


def _state(folder: Path) -> dict:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()}


def test_a_changed_filter_is_refused_before_anything_is_rewritten_and_the_original_resumes(student_config,
                                                                                            short_run):
    before = _state(short_run / "distilled")
    proc = _distill(student_config, short_run, *SHORT, "distill.filter_worst=0.2", check=False)
    assert one_error_line(proc) == (f"error: {short_run / 'distilled' / 'filter.json'}: the kept pairs were "
                                    "filtered with distill.filter_worst 0.1, not 0.2; set it back to resume, or "
                                    "pass --restart to start over (the previous run is moved aside), or use "
                                    "another output_dir")
    assert _state(short_run / "distilled") == before
    resumed = _distill(student_config, short_run, *SHORT)
    assert "filtering skipped" in resumed.stderr and "resuming from" in resumed.stderr
    assert _state(short_run / "distilled") == before


def test_restart_moves_the_previous_run_aside_and_starts_over(student_config, short_run):
    refused = _distill(student_config, short_run, *SHORT, "distill.beam_size=3", check=False)
    assert "pass --restart to start over" in one_error_line(refused)
    sets = [a for s in (f"output_dir={short_run}", *SHORT, "distill.beam_size=3") for a in ("--set", s)]
    again = run_mt("distill", student_config, *sets, "--restart")
    assert "resuming from" not in again.stderr and "translating skipped" not in again.stderr
    previous, = short_run.glob("previous-*")
    assert "moved the previous run" in again.stderr and str(previous) in again.stderr
    beams = [json.loads((run / "distilled" / "made_by.json").read_text())["decoding"]["beam_size"]
             for run in (previous, short_run)]
    assert beams == [2, 3]
    assert (previous / "checkpoint_last.pt").is_file() and (short_run / "checkpoint_last.pt").is_file()
    assert (previous / "data" / "prepared.json").is_file()


@pytest.mark.parametrize("name,remedy", [
    ("distilled/made_by.json", "mt distill cannot tell what made {run}/distilled: pass --restart to start over "
                               "(the previous run is moved aside), or use another output_dir"),
    ("distilled/filter.json", "remove it to filter the pairs again"),
    ("distill.json", "remove it to export and compare again"),
])
def test_a_damaged_state_file_is_one_line_naming_it_and_what_to_do(student_config, uninterrupted, name, remedy):
    path = uninterrupted / name
    good = path.read_bytes()
    damaged = good[:len(good) // 2]
    path.write_bytes(damaged)
    try:
        proc = _distill(student_config, uninterrupted, check=False)
        line = one_error_line(proc)
        assert line.startswith(f"error: {path}: damaged (not JSON: ") and proc.returncode == 1
        assert line.endswith("); " + remedy.format(run=uninterrupted))
        if name != "distilled/made_by.json":  # the remedy works: the file is made again, nothing else redone
            path.unlink()
            again = _distill(student_config, uninterrupted)
            assert "translating skipped" in again.stderr and "resuming from" in again.stderr
    finally:
        if not path.is_file() or path.read_bytes() == damaged:
            path.write_bytes(good)


@pytest.mark.parametrize("where", ["the teacher's folder", "a folder above it"])
def test_distilling_into_the_teachers_folder_is_refused_before_any_work(student_config, teacher, tmp_path, where):
    if where == "the teacher's folder":
        out, path = teacher.parent, teacher
    else:
        out, path = tmp_path / "run", tmp_path / "run" / "averaged" / "teacher.pt"
        path.parent.mkdir(parents=True)
        shutil.copy(teacher, path)
        (out / ".lock").touch()  # an mt folder: a run of its own
    proc = _distill(student_config, out, f"distill.teachers=[{path}]", check=False)
    assert one_error_line(proc) == (f"error: output_dir {out}: holds the teacher {path}; mt distill trains its "
                                    "student there: use another output_dir")
    assert not (out / "distilled").exists()
