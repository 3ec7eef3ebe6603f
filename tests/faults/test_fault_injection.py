"""Fault injection: every command given missing, wrong, empty, binary or huge input, unwritable and full outputs,
and signals, as a user would meet them. Each case checks the exit code, that stderr holds no traceback and names
the file, key or option, and that every file the user had is still there, unchanged."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from mt.checkpoint import load_checkpoint, save_checkpoint
from tests.conftest import DATA, ROOT, TINY, read_metrics, run_mt, tiny_overrides
from tests.faults.conftest import fails_cleanly, mounted, mt_process, snapshot

DEV_SRC = DATA / "dev.de"


# ---------------------------------------------------------------- helpers


def run_limited(*args, limit_file_bytes: int, cwd=None, input=b"") -> subprocess.CompletedProcess:
    proc = mt_process(*args, limit_file_bytes=limit_file_bytes, cwd=cwd)
    out, err = proc.communicate(input, timeout=600)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.decode(), err.decode())


def project_folder(tmp_path: Path) -> Path:
    """A user's project laid out like this repository: a data folder with a corpus, a config, notes."""
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    for name in ("sample-2k.de", "sample-2k.en"):
        shutil.copy(DATA / name, project / "data" / name)
    (project / "notes.txt").write_text("my notes\n")
    config = (TINY.read_text().replace("data/ddtp-de-en/", "data/").replace("dev_src: data/dev.de", "dev_src: null")
              .replace("dev_tgt: data/dev.en", "dev_tgt: null"))
    (project / "config.yaml").write_text(config)
    return project


@pytest.fixture(scope="module")
def model(trained_tiny) -> Path:
    return trained_tiny / "checkpoint_last.pt"


# ---------------------------------------------------------------- nothing a user made is lost


@pytest.mark.parametrize("command", ["prepare", "train"])
@pytest.mark.parametrize("output_dir", [".", "data", "config.yaml"])
def test_an_output_dir_holding_the_users_files_is_refused_and_left_alone(tmp_path, command, output_dir):
    project = project_folder(tmp_path)
    before = snapshot(project)
    proc = run_mt(command, "config.yaml", "--set", f"output_dir={output_dir}", cwd=project, check=False)
    line = fails_cleanly(proc, f"output_dir {output_dir}")
    assert "mt did not write" in line or "not a folder" in line
    assert snapshot(project) == before
    assert sorted(p.name for p in project.iterdir()) == ["config.yaml", "data", "notes.txt"]


def test_an_empty_output_dir_override_is_a_config_error(tmp_path):
    project = project_folder(tmp_path)
    before = snapshot(project)
    fails_cleanly(run_mt("prepare", "config.yaml", "--set", "output_dir=", cwd=project, check=False), "output_dir")
    assert snapshot(project) == before


def test_prepare_never_deletes_a_data_folder_it_did_not_write(tmp_path):
    run = tmp_path / "run"
    run_mt("prepare", TINY, *tiny_overrides(run))
    shutil.rmtree(run / "data")
    (run / "data").mkdir()
    (run / "data" / "mine.txt").write_text("precious\n")
    proc = run_mt("prepare", TINY, *tiny_overrides(run, **{"tokenizer.vocab_size": 400}), check=False)
    fails_cleanly(proc, run / "data", "not written by mt prepare")
    assert (run / "data" / "mine.txt").read_text() == "precious\n"


def test_an_empty_config_fails_before_making_any_folder(tmp_path):
    (tmp_path / "empty.yaml").write_text("")
    for command in ("prepare", "train"):
        fails_cleanly(run_mt(command, "empty.yaml", cwd=tmp_path, check=False), "data.train_src")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.yaml"]


def test_a_failed_prepare_leaves_no_folder_behind(tmp_path):
    proc = run_mt("prepare", TINY, *tiny_overrides(tmp_path / "runs" / "new", **{"tokenizer.vocab_size": 9}),
                  check=False)
    fails_cleanly(proc, "error: tokenizer.vocab_size=9: sentencepiece cannot train it")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------- config mistakes


@pytest.mark.parametrize("text, names", [
    ("train:\n  max_steps: 5\ntrain:\n  max_steps: 6\n", ["line 3", "duplicate key 'train'"]),
    ("model:\n  d_model: 64\n  d_model: 128\n", ["line 3", "duplicate key 'd_model'"]),
    ("model: [1, 2\n", ["malformed YAML"]),
    ("\x00\x01\x02\xff\xfe", ["cannot read config"]),
    ("train:\n  patience: 3\ndata:\n  train_src: a\n  train_tgt: b\n", ["train.patience", "dev set"]),
    ("decode:\n  max_len_a: .inf\n", ["decode.max_len_a", "finite"]),
    ("decode:\n  max_len_a: .nan\n", ["decode.max_len_a", "finite"]),
])
def test_config_mistakes_are_one_line_naming_the_key(tmp_path, text, names):
    path = tmp_path / "bad.yaml"
    path.write_bytes(text.encode("latin-1"))
    fails_cleanly(run_mt("train", path, "--set", f"output_dir={tmp_path / 'run'}", check=False), path, *names)
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- full disks and read-only places


def test_prepare_on_a_full_disk_is_one_line_and_leaves_no_partial_folder(tmp_path):
    with mounted(tmp_path / "disk", "size=128k") as disk:
        proc = run_mt("prepare", TINY, *tiny_overrides(disk / "run"), check=False)
        fails_cleanly(proc, "No space left on device")
        assert list(disk.iterdir()) == []  # the output_dir it made is removed again


def test_commands_writing_into_a_read_only_folder_are_one_line(tmp_path, model):
    with mounted(tmp_path / "ro", "ro") as ro:
        fails_cleanly(run_mt("prepare", TINY, *tiny_overrides(ro / "run"), check=False), ro / "run", "ead-only")
        fails_cleanly(run_mt("translate", "-c", model, "-i", DEV_SRC, "-o", ro / "out.txt", check=False),
                      ro / "out.txt", "cannot write")
        fails_cleanly(run_mt("average", model, model, "-o", ro / "avg.pt", check=False), ro / "avg.pt")
        fails_cleanly(run_mt("plot", "mask", "-o", ro / "mask.png", check=False), ro / "mask.png", "ead-only")


def test_an_output_dir_that_is_a_file_is_one_line(tmp_path):
    (tmp_path / "run").write_text("a file\n")
    fails_cleanly(run_mt("train", TINY, *tiny_overrides(tmp_path / "run"), check=False), "not a folder")
    assert (tmp_path / "run").read_text() == "a file\n"


def test_a_full_disk_under_translate_keeps_the_old_output_whole(tmp_path, model):
    out = tmp_path / "out.txt"
    out.write_text("an earlier translation\n")
    proc = run_limited("translate", "-c", model, "-i", DEV_SRC, "-o", out, "--beam-size", "1", "--chunk-lines", "10",
                       limit_file_bytes=2000)  # (greedy: beam search gives this tiny model's empty outputs)
    fails_cleanly(proc, out, "File too large")
    assert out.read_text() == "an earlier translation\n"
    # no temporary file left; the chunks on disk and their record stay, for the same command to go on from
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "out.txt.partial", "out.txt.resume.json"]
    proc = run_limited("translate", "-c", model, "-i", DEV_SRC, "-o", out, "--beam-size", "1", "--chunk-lines", "10",
                       limit_file_bytes=None)
    assert proc.returncode == 0 and "by an earlier run" in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"] and out.read_text().count("\n") == 883


def test_a_full_disk_under_evaluate_export_and_plot_is_one_line(tmp_path, model):
    hyp = tmp_path / "hyp.txt"
    hyp.write_text("a\n" * 883)
    proc = run_limited("evaluate", "--ref", DATA / "dev.en", "-c", model, "--src", DEV_SRC, "-o",
                       tmp_path / "e.txt", "--beam-size", "1", limit_file_bytes=2000)
    fails_cleanly(proc, tmp_path / "e.txt", "File too large")
    proc = run_limited("export", "-c", model, "-o", tmp_path / "ct2", limit_file_bytes=100_000)
    fails_cleanly(proc, "File too large")
    proc = run_limited("plot", "positions", "-o", tmp_path / "p.png", limit_file_bytes=1000)
    fails_cleanly(proc, tmp_path / "p.png", "File too large")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hyp.txt"]


# ---------------------------------------------------------------- metrics.jsonl survives a crash


def test_a_torn_metrics_line_is_dropped_on_resume(tmp_path):
    args = tiny_overrides(tmp_path, **{"train.max_steps": 20, "train.log_every": 5, "train.eval_every": 100,
                                       "train.save_every": 10})
    run_mt("train", TINY, *args)
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 21, "split": "tr')  # what a full disk leaves of a row
    run_mt("plot", "curves", tmp_path, "-o", tmp_path / "curves.png")  # a crashed run still draws
    resumed = run_mt("train", TINY, *args, "--set", "train.max_steps=30")
    assert "dropped 1 unreadable line" in resumed.stderr
    assert [r["step"] for r in read_metrics(tmp_path)] == [5, 10, 15, 20, 25, 30]


def test_a_failing_metrics_append_stops_training_with_one_line_and_resume_works(tmp_path):
    args = tiny_overrides(tmp_path, **{"train.max_steps": 10, "train.log_every": 1, "train.eval_every": 100,
                                       "train.save_every": 10})
    run_mt("train", TINY, *args)
    metrics = tmp_path / "metrics.jsonl"
    row = metrics.read_text().splitlines()[0]
    metrics.write_text((row + "\n") * (200_000 // (len(row) + 1)))  # valid rows of step 1, just under the limit
    proc = run_limited("train", TINY, *args, "--set", "train.max_steps=1000", "--set", "train.save_every=1000",
                       limit_file_bytes=200_000 + 3 * len(row))
    fails_cleanly(proc, f"{metrics}: cannot append (File too large)", "checkpoint_last.pt (step 10) is kept")
    resumed = run_mt("train", TINY, *args, "--set", "train.max_steps=12")
    assert "resuming from" in resumed.stderr and "at step 10" in resumed.stderr
    assert read_metrics(tmp_path)[-1]["step"] == 12


# ---------------------------------------------------------------- signals and exit codes


def _wait_for_line(proc, prefix: str, timeout: float = 300) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode()
        seen.append(line)
        if line.startswith(prefix) or not line:
            return seen
    raise AssertionError(f"no line starting {prefix!r}: {seen}")


def _endless_training(out: Path, save_every: int) -> tuple[list[str], subprocess.Popen]:
    """A tiny run that logs every step and never evaluates, started: its arguments and its process."""
    args = tiny_overrides(out, **{"train.max_steps": 100000, "train.log_every": 1, "train.eval_every": 100000,
                                  "train.save_every": save_every})
    return args, mt_process("train", TINY, *args)


def test_sigint_stops_training_with_130_after_saving(tmp_path):
    _, proc = _endless_training(tmp_path, save_every=100000)
    try:
        _wait_for_line(proc, "step 2:")
        proc.send_signal(signal.SIGINT)
        rest = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 130
    finally:
        proc.kill()
    assert "SIGINT: saved" in rest and "Traceback" not in rest
    assert load_checkpoint(tmp_path / "checkpoint_last.pt")["step"] >= 2


def test_sigterm_during_a_dev_evaluation_stops_within_seconds(tmp_path):
    long_dev_src, long_dev_tgt = tmp_path / "dev.de", tmp_path / "dev.en"
    long_dev_src.write_text(DEV_SRC.read_text() * 10)
    long_dev_tgt.write_text((DATA / "dev.en").read_text() * 10)
    run = tmp_path / "run"
    args = tiny_overrides(run, **{"train.max_steps": 1000, "train.log_every": 1, "train.eval_every": 1,
                                  "data.dev_src": long_dev_src, "data.dev_tgt": long_dev_tgt,
                                  "decode.max_len_b": 200})
    proc = mt_process("train", TINY, *args)
    try:
        _wait_for_line(proc, "step 1:")  # the log line comes just before the evaluation starts
        time.sleep(1.0)
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM
        assert time.monotonic() - sent < 20, rest  # a scheduler's grace period is commonly 30 s
    finally:
        proc.kill()
    assert "SIGTERM during the dev evaluation; it is skipped" in rest, rest
    assert load_checkpoint(run / "checkpoint_last.pt")["step"] == 1
    assert read_metrics(run, "dev") == []


def test_sigkill_mid_training_loses_at_most_the_steps_since_the_last_checkpoint(tmp_path):
    args, proc = _endless_training(tmp_path, save_every=5)
    try:
        _wait_for_line(proc, "step 7:")
    finally:
        proc.kill()
        proc.wait()
    resumed = run_mt("train", TINY, *args, "--set", "train.max_steps=8")
    assert "at step 5" in resumed.stderr
    assert [r["step"] for r in read_metrics(tmp_path)] == list(range(1, 9))


# ---------------------------------------------------------------- translate: stdin, pipes, signals


def test_a_closed_pipe_ends_translate_quietly_with_141(tmp_path, model):
    big = tmp_path / "big.de"
    big.write_text(DEV_SRC.read_text() * 10)  # more output than a pipe holds
    for source in (["-i", big], []):  # a file, and stdin
        proc = mt_process("translate", "-c", model, "--beam-size", "1", *source,
                          stdin=open(big, "rb") if not source else subprocess.DEVNULL)
        proc.stdout.readline()
        proc.stdout.close()  # `| head -n 1`
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=300) == 141, err
        # Nothing but the warnings of dev lines longer than the tiny model learned (64 tokens): no traceback, no
        # BrokenPipeError
        assert all(line.startswith("warning: input line ") for line in err.splitlines()), err


def test_ctrl_c_while_translate_waits_on_stdin_is_130_without_an_abort(model):
    proc = mt_process("translate", "-c", model, "--beam-size", "1")
    try:
        proc.stdin.write(b"Hallo Welt\n")
        proc.stdin.flush()
        proc.stdout.readline()  # translated: now it waits for the next line
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) == 130, err
    finally:
        proc.kill()
    assert err.strip() == "interrupted", err


def test_stdin_closed_mid_stream_translates_what_came(model):
    proc = mt_process("translate", "-c", model, "--beam-size", "1")
    out, err = proc.communicate(b"eins\nzwei\ndrei ohne Zeilenende", timeout=120)
    assert proc.returncode == 0, err
    assert len(out.decode().splitlines()) == 3


def test_binary_and_huge_input_lines_are_warned_about_and_translated(tmp_path, model):
    src = tmp_path / "bad.de"
    src.write_bytes(b"gut\n\xff\xfe\x00binary\n" + b"Wort " * 5000 + b"\n")
    proc = run_mt("translate", "-c", model, "-i", src, "--beam-size", "1")
    assert len(proc.stdout.splitlines()) == 3
    assert "input line 2: invalid UTF-8" in proc.stderr and "input line 3:" in proc.stderr


@pytest.mark.parametrize("args, names", [
    (["-i", "missing.de"], ["-i missing.de", "no such file"]),
    (["-i", "."], ["-i .", "folder"]),
    (["-i", DEV_SRC, "-o", "."], ["-o .", "folder"]),
    (["-i", DEV_SRC, "-o", "no/such/folder/out.txt"], ["no such folder"]),
    (["--device", "gpu"], ["--device", "gpu"]),
    (["--max-len-a", "inf"], ["decode.max_len_a", "finite"]),
    (["--max-len-a", "nan"], ["decode.max_len_a", "finite"]),
    (["--beam-size", "0"], ["decode.beam_size", "at least 1"]),
    (["--set", "model.d_model=3"], ["--set model.d_model=3", "decode.key=value"]),
    (["--set", "decode.beam_size=many"], ["decode.beam_size must be int"]),
    (["--constraints", "--sampling"], ["--constraints", "--sampling"]),
    (["--prefix", "--constraints"], ["--prefix and --constraints"]),
    (["--output-format", "xml"], ["--output-format"]),
])
def test_translate_mistakes_fail_before_any_work(tmp_path, model, args, names):
    start = time.monotonic()
    proc = run_mt("translate", "-c", model, *args, input="Hallo\n", cwd=tmp_path, check=False)
    fails_cleanly(proc, *names)
    assert list(tmp_path.iterdir()) == []
    assert time.monotonic() - start < 60


@pytest.mark.parametrize("code", [2])
def test_usage_errors_are_one_line_with_exit_2(model, code):
    for args in (["translate"], ["average", "--last", "0", "x"], ["average", "--last", "-1", "x"],
                 ["info", "--bogus"]):
        fails_cleanly(run_mt(*args, check=False), code=code)


def test_a_random_file_given_as_a_checkpoint_is_named_as_not_a_checkpoint(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(os.urandom(5000))
    for args in (["translate", "-c", junk], ["info", junk], ["average", junk, junk, "-o", tmp_path / "a.pt"],
                 ["export", "-c", junk, "-o", tmp_path / "x"]):
        fails_cleanly(run_mt(*args, input="", check=False), junk, "not")


def test_a_closed_stdout_is_one_line(model):
    proc = subprocess.run(f"{sys.executable} -m mt info {model} >&-", shell=True, capture_output=True, text=True,
                          cwd=ROOT)
    fails_cleanly(proc, "standard output is closed")


def test_a_prefix_longer_than_the_model_is_cut_with_a_warning(model):
    long_prefix = "Wort " * 400
    proc = run_mt("translate", "-c", model, "--prefix", "--beam-size", "1", input=f"Hallo\t{long_prefix}\n")
    assert "warning: input line 1: target prefix of" in proc.stderr and "cut to" in proc.stderr
    assert len(proc.stdout.splitlines()) == 1


def test_constraint_terms_too_long_to_fit_are_warned_about(model):
    long_term = "Wort " * 400
    proc = run_mt("translate", "-c", model, "--constraints", input=f"Hallo\t{long_term}\n")
    assert "warning: input line 1: constraint terms of" in proc.stderr and "may miss some" in proc.stderr


# ---------------------------------------------------------------- files the user makes


def test_outputs_are_made_as_open_would_make_them(tmp_path, model):
    mode = 0o666 & ~0o027
    script = ("import os, sys, runpy; os.umask(0o027); sys.argv = ['mt'] + sys.argv[1:]; "
              "runpy.run_module('mt', run_name='__main__')")
    out = tmp_path / "out.txt"
    subprocess.run([sys.executable, "-c", script, "translate", "-c", str(model), "-i", str(DEV_SRC), "-o", str(out),
                    "--beam-size", "1"], check=True, cwd=ROOT, capture_output=True)
    subprocess.run([sys.executable, "-c", script, "average", str(model), str(model), "-o", str(tmp_path / "a.pt")],
                   check=True, cwd=ROOT, capture_output=True)
    assert out.stat().st_mode & 0o777 == mode
    assert (tmp_path / "a.pt").stat().st_mode & 0o777 == mode


def test_an_output_symlink_is_written_through(tmp_path, model):
    target = tmp_path / "real.txt"
    target.write_text("old\n")
    (tmp_path / "link.txt").symlink_to(target)
    run_mt("translate", "-c", model, "-i", DEV_SRC, "-o", tmp_path / "link.txt", "--beam-size", "1")
    assert (tmp_path / "link.txt").is_symlink()
    assert len(target.read_text().splitlines()) == 883


def test_export_force_does_not_replace_a_regular_file(tmp_path, model):
    existing = tmp_path / "model"
    existing.write_text("mine\n")
    fails_cleanly(run_mt("export", "-c", model, "-o", existing, "--force", check=False), existing, "not a folder")
    assert existing.read_text() == "mine\n"


# ---------------------------------------------------------------- checkpoints, caches and exports


def test_average_refuses_checkpoints_whose_vocabularies_differ_at_the_same_size(tmp_path, model):
    other = load_checkpoint(model)
    proto = bytearray(other["tgt_tokenizer"].numpy().tobytes())
    other_tok = torch.tensor(list(proto[:-1]) + [proto[-1] ^ 1], dtype=torch.uint8)  # same size, other bytes
    other["tgt_tokenizer"] = other_tok
    other["src_tokenizer"] = other_tok
    save_checkpoint(tmp_path / "other.pt", {k: v for k, v in other.items() if k != "format"})
    fails_cleanly(run_mt("average", model, tmp_path / "other.pt", "-o", tmp_path / "avg.pt", check=False),
                  tmp_path / "other.pt", "vocabulary differs")
    assert not (tmp_path / "avg.pt").exists()


def test_average_last_takes_exactly_the_newest_n(trained_tiny, tmp_path):
    proc = run_mt("average", "--last", "1", trained_tiny, "-o", tmp_path / "avg.pt")
    assert "averaged 1 checkpoint into" in proc.stderr
    assert load_checkpoint(tmp_path / "avg.pt")["averaged_from"] == [str(trained_tiny / "checkpoint_60.pt")]


def test_a_prepared_cache_missing_its_sentencepiece_model_says_how_to_rebuild(tmp_path):
    run_mt("prepare", TINY, *tiny_overrides(tmp_path))
    (tmp_path / "data" / "src.model").unlink()
    proc = run_mt("train", TINY, *tiny_overrides(tmp_path), check=False)
    fails_cleanly(proc, tmp_path / "data" / "src.model", "--restart")
    run_mt("prepare", TINY, *tiny_overrides(tmp_path), "--restart")
    assert (tmp_path / "data" / "src.model").is_file()


@pytest.fixture(scope="module")
def exported(trained_tiny, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("export") / "ct2"
    run_mt("export", "-c", trained_tiny / "checkpoint_last.pt", "-o", out)
    return out


@pytest.mark.parametrize("damage, names", [
    (lambda d: (d / "model.bin").unlink(), ["model.bin", "missing"]),
    (lambda d: (d / "source.spm").unlink(), ["source.spm", "missing"]),
    (lambda d: (d / "mt.yaml").write_text("model: [1, 2\n"), ["mt.yaml", "malformed"]),
    (lambda d: (d / "mt.yaml").write_text("model:\n  d_model: 7\n"), ["mt.yaml", "model.d_model"]),
    (lambda d: (d / "source.spm").write_bytes(b"junk"), ["not a usable exported model"]),
])
def test_a_damaged_export_is_one_line(tmp_path, exported, damage, names):
    copy = tmp_path / "ct2"
    shutil.copytree(exported, copy)
    damage(copy)
    fails_cleanly(run_mt("translate", "-c", copy, input="Hallo\n", check=False), *names)


def test_evaluate_mistakes_are_one_line(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    fails_cleanly(run_mt("evaluate", "--ref", empty, "--hyp", empty, check=False), "--ref", "empty")
    fails_cleanly(run_mt("evaluate", "--ref", tmp_path / "no.txt", "--hyp", empty, check=False), "no such file")
    fails_cleanly(run_mt("evaluate", "--ref", DATA / "dev.en", "--hyp", tmp_path, check=False), "--hyp", "folder")
    binary = tmp_path / "bin.txt"
    binary.write_bytes(b"\xff\xfe\x00" * 10)
    fails_cleanly(run_mt("evaluate", "--ref", binary, "--hyp", binary, check=False), binary)


def test_info_and_plot_mistakes_are_one_line(tmp_path):
    fails_cleanly(run_mt("info", tmp_path / "none.pt", check=False), "none.pt")
    fails_cleanly(run_mt("plot", "curves", tmp_path, "-o", tmp_path / "c.png", check=False), "metrics.jsonl")
    fails_cleanly(run_mt("plot", "mask", "-o", tmp_path / "m.gif", check=False), ".png or .svg")
