"""Bad input gives one clear line and a non-zero exit; faults lose nothing."""

import io
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mt.checkpoint import load_checkpoint, save_checkpoint
from tests.conftest import ROOT, TINY, one_error_line, read_metrics, run_mt, tiny_overrides


def _train_error(tmp_path, **values) -> str:
    return one_error_line(run_mt("train", TINY, *tiny_overrides(tmp_path / "run", **values), check=False))


def test_parallel_files_of_different_lengths(tmp_path):
    src, tgt = tmp_path / "a.de", tmp_path / "a.en"
    src.write_text("eins\nzwei\ndrei\n")
    tgt.write_text("one\ntwo\n")
    line = _train_error(tmp_path, **{"data.train_src": src, "data.train_tgt": tgt})
    assert line == f"error: parallel files differ in length: {src} has 3 lines, {tgt} has 2"


def test_missing_and_empty_data_files(tmp_path):
    assert _train_error(tmp_path, **{"data.train_src": tmp_path / "nope.de"}) == f"error: {tmp_path / 'nope.de'}: no such file"
    (tmp_path / "e.de").write_text("")
    (tmp_path / "e.en").write_text("")
    line = _train_error(tmp_path, **{"data.train_src": tmp_path / "e.de", "data.train_tgt": tmp_path / "e.en"})
    assert line == f"error: {tmp_path / 'e.de'}: empty file"


def test_undecodable_training_data_names_file_and_line(tmp_path):
    src, tgt = tmp_path / "b.de", tmp_path / "b.en"
    src.write_bytes(b"gut\nschlecht \xff\xfe hier\n")
    tgt.write_text("good\nbad here\n")
    line = _train_error(tmp_path, **{"data.train_src": src, "data.train_tgt": tgt})
    assert line.startswith(f"error: {src}:2: not valid UTF-8")


def test_overlong_training_lines_are_skipped_and_counted(tmp_path):
    proc = run_mt("prepare", TINY, *tiny_overrides(tmp_path, **{"data.max_len": 20}))
    assert "over 20 tokens" in proc.stderr
    skipped = int(proc.stderr.split("skipped 0 with an empty side, ")[1].split(" over")[0])
    assert skipped > 100


def test_config_value_out_of_range_is_one_line(tmp_path):
    assert "model.dropout must be in [0, 1)" in _train_error(tmp_path, **{"model.dropout": -0.5})


def test_sigterm_saves_a_checkpoint_and_resume_continues(tmp_path):
    args = tiny_overrides(tmp_path, **{"train.max_steps": 100000, "train.log_every": 1, "train.save_every": 100000,
                                       "train.eval_every": 100000})
    proc = subprocess.Popen([sys.executable, "-m", "mt", "train", str(TINY), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if line.startswith("step 3:"):
                break
        proc.send_signal(signal.SIGTERM)
        rest = proc.stderr.read()
        assert proc.wait(timeout=120) == 128 + signal.SIGTERM  # saved, resumable, and not finished
    finally:
        proc.kill()
    assert "SIGTERM: saved" in rest and "run the same command again to resume" in rest
    step = load_checkpoint(tmp_path / "checkpoint_last.pt")["step"]
    assert step >= 3
    resumed = run_mt("train", TINY, *args, "--set", f"train.max_steps={step + 2}")
    assert f"at step {step}" in resumed.stderr
    assert load_checkpoint(tmp_path / "checkpoint_last.pt")["step"] == step + 2


def test_resumed_run_gives_the_same_losses_as_an_uninterrupted_one(tmp_path):
    settings_ = {"train.max_steps": 16, "train.log_every": 1, "train.save_every": 8, "train.eval_every": 100,
                 "model.dropout": 0.3, "train.batch_tokens": 512}
    run_mt("train", TINY, *tiny_overrides(tmp_path / "whole", **settings_))
    split = tiny_overrides(tmp_path / "split", **settings_)
    run_mt("train", TINY, *split, "--set", "train.max_steps=8")
    run_mt("train", TINY, *split)
    whole = [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "whole")]
    resumed = [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "split")]
    assert len(whole) == 16 and resumed == whole


def test_nonfinite_losses_stop_training_without_saving_anything_corrupt(tmp_path):
    args = tiny_overrides(tmp_path, **{"train.max_steps": 2, "train.save_every": 2, "train.eval_every": 100})
    run_mt("train", TINY, *args)
    last = tmp_path / "checkpoint_last.pt"
    ckpt = load_checkpoint(last)
    for name, tensor in ckpt["model"].items():
        if name.endswith("w1.weight"):
            tensor.fill_(float("nan"))
    save_checkpoint(last, {k: v for k, v in ckpt.items() if k != "format"})
    before = last.read_bytes()
    proc = run_mt("train", TINY, *args, "--set", "train.max_steps=50", "--set", "train.max_bad_steps=3", check=False)
    assert "non-finite loss, update skipped (1 in a row)" in proc.stderr
    error = proc.stderr.strip().splitlines()[-1]
    assert error.startswith("error: 3 non-finite losses in a row") and "train.lr_scale" in error
    assert proc.returncode != 0 and last.read_bytes() == before


def test_output_dir_from_an_incompatible_config_is_refused(tmp_path):
    args = tiny_overrides(tmp_path, **{"train.max_steps": 2, "train.save_every": 2, "train.eval_every": 100})
    run_mt("train", TINY, *args)
    wider = one_error_line(run_mt("train", TINY, *args, "--set", "model.d_model=32", check=False))
    assert "model.d_model" in wider and "--restart" in wider
    vocab = one_error_line(run_mt("train", TINY, *args, "--set", "tokenizer.vocab_size=400", check=False))
    assert "tokenizer.vocab_size" in vocab


def test_translate_survives_bad_bytes_and_long_lines(trained_tiny):
    long_line = " ".join(["Paket"] * 400)
    data = b"gut\n\xff\xfe kaputt\n\n" + long_line.encode() + b"\n"
    proc = subprocess.run([sys.executable, "-m", "mt", "translate", "-c", str(trained_tiny / "checkpoint_last.pt"),
                           "--beam-size", "1"], input=data, capture_output=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0
    assert proc.stdout.count(b"\n") == 4
    err = proc.stderr.decode()
    assert "input line 2: invalid UTF-8 replaced" in err and "input line 4:" in err and "pieces, joined" in err


def test_debug_shows_the_traceback(tmp_path):
    proc = run_mt("translate", "-c", tmp_path / "none.pt", input="", check=False, env={"MT_DEBUG": "1"})
    assert proc.returncode != 0 and "Traceback" in proc.stderr


@pytest.fixture(scope="module")
def translator(trained_tiny):
    from mt.decoding.loading import load_translator
    return load_translator(trained_tiny / "checkpoint_last.pt", "cpu")


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.one_of(st.text(max_size=40).map(lambda s: s.encode("utf-8", "surrogatepass")),
                          st.binary(max_size=40)), max_size=6))
def test_translate_keeps_one_line_per_input_line(translator, lines):
    from mt.config import DecodeConfig
    from mt.commands.translate import run_translate
    from mt.decoding.lines import LineFormat

    lines = [line.replace(b"\n", b" ") for line in lines]
    source = io.BytesIO(b"".join(line + b"\n" for line in lines))
    sink = io.StringIO()
    count = run_translate(translator, source, sink, DecodeConfig(beam_size=2, max_len_b=5), LineFormat(),
                          warn=lambda message: None)
    assert count == len(lines)
    assert sink.getvalue().count("\n") == len(lines)
