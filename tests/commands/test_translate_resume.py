"""`mt translate -i FILE -o FILE` of a big file: progress on stderr, durable chunks, and the same command resuming an
interrupted run to the output of a run never stopped (mt/commands/resumable_output.py)."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import DATA, ROOT, one_error_line, run_mt

LINES = 3000


@pytest.fixture(scope="module")
def big_input(tmp_path_factory):
    """3,000 lines of the shipped corpus, and the output of one uninterrupted run."""
    folder = tmp_path_factory.mktemp("big")
    source = folder / "big.de"
    lines = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
    source.write_text("".join(lines[i % len(lines)][:60] + "\n" for i in range(LINES)), encoding="utf-8")
    return source


def _args(checkpoint, source, out, *more):
    return ["translate", "-c", checkpoint, "-i", source, "-o", out, "--chunk-lines", "100", "--beam-size", "1",
            *more]


@pytest.fixture(scope="module")
def reference(trained_tiny, big_input, tmp_path_factory):
    out = tmp_path_factory.mktemp("reference") / "out.en"
    run_mt(*_args(trained_tiny / "checkpoint_last.pt", big_input, out, "--quiet"))
    return out.read_bytes()


def test_progress_goes_to_a_non_terminal_stderr_now_and_then_and_at_the_end(trained_tiny, big_input, tmp_path,
                                                                              reference):
    out = tmp_path / "out.en"
    proc = run_mt(*_args(trained_tiny / "checkpoint_last.pt", big_input, out), env={"MT_PROGRESS_EVERY_S": "0"})
    lines = proc.stderr.splitlines()
    assert any(line.startswith("translate: translated ") and f"of {LINES:,} lines (" in line for line in lines), lines
    assert lines[-1].startswith(f"translate: translated {LINES:,} lines in ") and "lines/s)" in lines[-1]
    assert out.read_bytes() == reference and not list(tmp_path.glob("out.en.*"))
    quiet = run_mt(*_args(trained_tiny / "checkpoint_last.pt", big_input, tmp_path / "q.en", "--quiet"))
    assert quiet.stderr == ""
    piped = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--beam-size", "1",
                   input="Hallo Welt\n", env={"MT_PROGRESS_EVERY_S": "0"})
    assert piped.stderr == "" and piped.stdout.count("\n") == 1  # stdin: a stream, no progress


@pytest.mark.slow
def test_killed_five_times_at_random_points_the_same_command_ends_with_the_uninterrupted_output(
        trained_tiny, big_input, tmp_path, reference):
    out, record = tmp_path / "out.en", tmp_path / "out.en.resume.json"
    args = [sys.executable, "-m", "mt", *map(str, _args(trained_tiny / "checkpoint_last.pt", big_input, out,
                                                         "--quiet"))]
    rng, done = random.Random(7), []
    for _ in range(5):
        proc = subprocess.Popen(args, cwd=ROOT, stderr=subprocess.PIPE)
        start = json.loads(record.read_text())["lines"] if record.exists() else 0
        target = min(start + rng.randrange(1, 600), LINES - 100)
        deadline = time.monotonic() + 120
        while proc.poll() is None and time.monotonic() < deadline:
            if record.exists() and json.loads(record.read_text())["lines"] >= target:
                time.sleep(rng.random() * 0.3)  # somewhere inside the next chunk, or between two
                break
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert not out.exists()
        done.append(json.loads(record.read_text())["lines"])
    assert done == sorted(done) and done[-1] > 0, done  # each run went on from the one before
    proc = run_mt(*args[3:])
    assert out.read_bytes() == reference
    assert not record.exists() and not (tmp_path / "out.en.partial").exists()


def test_a_changed_input_or_option_is_refused_in_one_line_and_restart_starts_over(trained_tiny, big_input,
                                                                                  tmp_path, reference):
    out, record = tmp_path / "out.en", tmp_path / "out.en.resume.json"
    checkpoint = trained_tiny / "checkpoint_last.pt"
    source = tmp_path / "in.de"
    source.write_bytes(big_input.read_bytes())
    proc = subprocess.Popen([sys.executable, "-m", "mt", *map(str, _args(checkpoint, source, out, "--quiet"))],
                            cwd=ROOT, stderr=subprocess.PIPE)
    while not (record.exists() and json.loads(record.read_text())["lines"] >= 200):
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    other = run_mt("translate", "-c", checkpoint, "-i", source, "-o", out, "--chunk-lines", "100", "--beam-size",
                   "2", "--quiet", check=False)
    assert "an interrupted run is there" in one_error_line(other)
    assert "its options: decode.beam_size 1 then, 2 now" in other.stderr
    text = source.read_text(encoding="utf-8")
    source.write_text("X" + text[1:], encoding="utf-8")  # same size, another first line
    changed = run_mt(*_args(checkpoint, source, out, "--quiet"), check=False)
    assert "its input: " in one_error_line(changed) or "not the ones translated" in changed.stderr
    source.write_text(text, encoding="utf-8")  # the same bytes again, a new mtime
    again = run_mt(*_args(checkpoint, source, out, "--quiet"), check=False)
    assert "its input: mtime_ns" in one_error_line(again)
    run_mt(*_args(checkpoint, source, out, "--quiet", "--restart"))
    assert out.read_bytes() == reference and not record.exists()


def test_a_partial_file_mt_did_not_write_is_left_alone(trained_tiny, big_input, tmp_path):
    (tmp_path / "out.en.partial").write_text("mine\n")
    proc = run_mt(*_args(trained_tiny / "checkpoint_last.pt", big_input, tmp_path / "out.en"), check=False)
    assert "is in the way" in one_error_line(proc) and (tmp_path / "out.en.partial").read_text() == "mine\n"


def test_shards_joined_by_cat_are_the_one_process_output(trained_tiny, big_input, tmp_path, reference):
    checkpoint = trained_tiny / "checkpoint_last.pt"
    parts = [tmp_path / f"part{i}.en" for i in range(3)]
    for i, part in enumerate(parts):
        run_mt(*_args(checkpoint, big_input, part, "--quiet", "--shard", f"{i}/3"))
    assert b"".join(p.read_bytes() for p in parts) == reference
    assert [p.read_bytes().count(b"\n") for p in parts] == [1000, 1000, 1000]  # 30 chunks of 100, 10 a shard
    piped = run_mt("translate", "-c", checkpoint, "-i", big_input, "--shard", "0/2", check=False)
    assert "--shard: needs -i FILE and -o FILE" in one_error_line(piped)
    wrong = run_mt(*_args(checkpoint, big_input, tmp_path / "x.en", "--shard", "2/2"), check=False)
    assert "--shard 2/2: give I/N, the I-th of N shards counted from 0" in one_error_line(wrong)


def _torchrun(checkpoint, source, out, *more):
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "mt",
            *map(str, _args(checkpoint, source, out, "--quiet", *more))]


def test_torchrun_with_two_processes_writes_the_one_process_output_and_resumes(trained_tiny, big_input, tmp_path,
                                                                               reference):
    out, checkpoint = tmp_path / "out.en", trained_tiny / "checkpoint_last.pt"
    record = tmp_path / "out.en.part-1-of-2.resume.json"
    proc = subprocess.Popen(_torchrun(checkpoint, big_input, out), cwd=ROOT, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not (record.exists() and json.loads(record.read_text())["lines"] >= 300):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.01)
    _kill_all_writing(out)  # torchrun and both ranks (torchrun starts each rank in a session of its own)
    proc.wait()
    assert not out.exists()
    finished = subprocess.run(_torchrun(checkpoint, big_input, out), cwd=ROOT, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert out.read_bytes() == reference
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.en"]  # the parts and their records removed


def test_evaluate_and_score_show_their_progress_too(trained_tiny, big_input, tmp_path, reference):
    checkpoint, hyps = trained_tiny / "checkpoint_last.pt", tmp_path / "hyp.en"
    hyps.write_bytes(reference)
    every = {"MT_PROGRESS_EVERY_S": "0"}
    scored = run_mt("score", "-c", checkpoint, "--src", big_input, "--tgt", hyps, "-o", tmp_path / "s.txt", env=every)
    assert any(f" of {LINES:,} pairs (" in line for line in scored.stderr.splitlines()), scored.stderr
    assert scored.stderr.splitlines()[-1].startswith(f"score: scored {LINES:,} pairs in ")
    assert (tmp_path / "s.txt").read_text().count("\n") == LINES
    evaluated = run_mt("evaluate", "-c", checkpoint, "--src", big_input, "--ref", hyps, "--beam-size", "1", "--json",
                       env=every)
    assert evaluated.stderr.splitlines()[-1].startswith(f"evaluate: translated {LINES:,} lines in ")
    # the same model, greedy, as made the references (one-word lines: chrF, as BLEU has no 4-grams to count)
    assert json.loads(evaluated.stdout)["chrf"]["score"] > 90
    quiet = run_mt("score", "-c", checkpoint, "--src", big_input, "--tgt", hyps, "-q", "-o", tmp_path / "q.txt")
    assert quiet.stderr == ""


def _kill_all_writing(out) -> None:
    """SIGKILL to every process whose command line names `out`."""
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and str(out).encode() in open(f"/proc/{entry}/cmdline", "rb").read():
                os.kill(int(entry), signal.SIGKILL)
        except (OSError, ProcessLookupError):  # ended meanwhile
            pass


def test_a_second_run_on_the_same_output_is_refused_while_the_first_writes(trained_tiny, big_input, tmp_path,
                                                                           reference):
    out, record = tmp_path / "out.en", tmp_path / "out.en.resume.json"
    args = _args(trained_tiny / "checkpoint_last.pt", big_input, out, "--quiet")
    first = subprocess.Popen([sys.executable, "-m", "mt", *map(str, args)], cwd=ROOT, stderr=subprocess.PIPE)
    try:
        while not (record.exists() and json.loads(record.read_text())["lines"] >= 100):
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.01)
        for more in ((), ("--restart",)):
            second = run_mt(*args, *more, check=False)
            assert "another run is writing out.en.partial now" in one_error_line(second)
    finally:
        first.wait(timeout=300)
    assert first.returncode == 0 and out.read_bytes() == reference


def test_a_document_shows_its_progress_in_sentences(trained_tiny, big_input, tmp_path):
    checkpoint, page = trained_tiny / "checkpoint_last.pt", tmp_path / "page.html"
    paragraphs = big_input.read_text(encoding="utf-8").splitlines()[:600]
    page.write_text("<html><body>" + "".join(f"<p>{p}</p>\n" for p in paragraphs) + "</body></html>\n",
                    encoding="utf-8")
    proc = run_mt("translate", "-c", checkpoint, "-i", page, "-o", tmp_path / "out.html", "--beam-size", "1",
                  env={"MT_PROGRESS_EVERY_S": "0"})
    lines = proc.stderr.splitlines()
    total = int(re.match(r"translate: translated ([\d,]+) sentences in ", lines[-1]).group(1).replace(",", ""))
    assert total >= 600 and any(f" of {total:,} sentences (" in line for line in lines[:-1]), proc.stderr
    quiet = run_mt("translate", "-c", checkpoint, "-i", page, "-o", tmp_path / "q.html", "--beam-size", "1", "-q")
    assert quiet.stderr == "" and (tmp_path / "q.html").read_bytes() == (tmp_path / "out.html").read_bytes()
