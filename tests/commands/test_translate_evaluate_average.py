"""`mt translate`, `mt evaluate` and `mt average` driven through the real command."""

import json
import select
import subprocess
import sys

import pytest
import torch

from mt.checkpoint import load_checkpoint
from tests.conftest import DATA, ROOT, run_mt


def test_translate_pipe_gives_one_line_per_input_line(trained_tiny):
    lines = ["Dieses Paket enthält die Dokumentation.", "", "  ", "Ein Texteditor.", ""]
    proc = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--beam-size", "2",
                  input="\n".join(lines) + "\n")
    out = proc.stdout.split("\n")
    assert len(out) == len(lines) + 1 and out[-1] == ""
    assert out[1] == "" and out[4] == ""


def test_translate_nbest_and_scores_formats(trained_tiny, tmp_path):
    src = tmp_path / "in.de"
    src.write_text("Ein Texteditor.\n\nDieses Paket enthält Dateien.\n", encoding="utf-8")
    nbest = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "-i", src, "--nbest", "3").stdout
    rows = [line.split("\t") for line in nbest.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "1", "1", "2", "2", "2"]
    assert all(len(r) == 3 for r in rows)
    scores = [float(r[1]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "-i", src, "-o", tmp_path / "out.en", "--scores")
    scored = (tmp_path / "out.en").read_text(encoding="utf-8").splitlines()
    assert len(scored) == 3 and all(float(line.split("\t")[0]) <= 0 for line in scored)


def test_translate_streams_before_end_of_input(trained_tiny):
    proc = subprocess.Popen([sys.executable, "-m", "mt", "translate", "-c", str(trained_tiny / "checkpoint_last.pt")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    try:
        proc.stdin.write("Ein Texteditor.\n".encode())
        proc.stdin.flush()
        ready, _, _ = select.select([proc.stdout], [], [], 120)  # never hang the suite if streaming breaks
        assert ready, "no output within 120 s while stdin stayed open"
        line = proc.stdout.readline()  # arrives while stdin is still open
        assert line.endswith(b"\n")
        proc.stdin.write(b"Noch eine Zeile.\n")
        proc.stdin.close()
        assert len(proc.stdout.read().splitlines()) == 1
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()


def test_evaluate_matches_sacrebleu_command_line(tmp_path):
    refs = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:200]
    hyps = [" ".join(r.split()[::-1][:8]) if i % 3 else r for i, r in enumerate(refs)]
    (tmp_path / "ref").write_text("\n".join(refs) + "\n", encoding="utf-8")
    (tmp_path / "hyp").write_text("\n".join(hyps) + "\n", encoding="utf-8")
    ours = json.loads(run_mt("evaluate", "--hyp", tmp_path / "hyp", "--ref", tmp_path / "ref",
                             "--metrics", "bleu,chrf,ter", "--json").stdout)
    theirs = subprocess.run([sys.executable, "-m", "sacrebleu", str(tmp_path / "ref"), "-i", str(tmp_path / "hyp"),
                             "-m", "bleu", "chrf", "ter", "-w", "4"], capture_output=True, text=True, check=True)
    reference = {r["name"]: r for r in json.loads(theirs.stdout)}
    assert ours["bleu"]["score"] == pytest.approx(reference["BLEU"]["score"], abs=1e-4)
    assert ours["chrf"]["score"] == pytest.approx(reference["chrF2"]["score"], abs=1e-4)
    assert ours["ter"]["score"] == pytest.approx(reference["TER"]["score"], abs=1e-4)
    assert ours["bleu"]["signature"] == reference["BLEU"]["signature"]
    assert 0 < ours["bleu"]["score"] < 100


def test_evaluate_rejects_mismatched_line_counts(tmp_path):
    (tmp_path / "ref").write_text("a\nb\nc\n")
    (tmp_path / "hyp").write_text("a\nb\n")
    proc = run_mt("evaluate", "--hyp", tmp_path / "hyp", "--ref", tmp_path / "ref", check=False)
    assert proc.returncode != 0
    assert proc.stderr.strip() == f"error: {tmp_path / 'hyp'} has 2 lines but {tmp_path / 'ref'} has 3"


def test_evaluate_translates_with_a_checkpoint(trained_tiny, tmp_path):
    src, ref = tmp_path / "src", tmp_path / "ref"
    src.write_text("".join((DATA / "dev.de").read_text(encoding="utf-8").splitlines(True)[:20]), encoding="utf-8")
    ref.write_text("".join((DATA / "dev.en").read_text(encoding="utf-8").splitlines(True)[:20]), encoding="utf-8")
    out = run_mt("evaluate", "-c", trained_tiny / "checkpoint_last.pt", "--src", src, "--ref", ref, "--json",
                 "-o", tmp_path / "hyp").stdout
    assert {"bleu", "chrf"} == set(json.loads(out))
    assert len((tmp_path / "hyp").read_text(encoding="utf-8").splitlines()) == 20


def test_average_takes_the_mean_of_parameters(trained_tiny, tmp_path):
    a, b = trained_tiny / "checkpoint_30.pt", trained_tiny / "checkpoint_60.pt"
    run_mt("average", a, b, "-o", tmp_path / "avg.pt")
    avg = load_checkpoint(tmp_path / "avg.pt")["model"]
    first, second = load_checkpoint(a)["model"], load_checkpoint(b)["model"]
    for name in first:
        assert torch.allclose(avg[name], (first[name] + second[name]) / 2, atol=1e-6), name
    run_mt("average", "--last", "2", trained_tiny, "-o", tmp_path / "last2.pt")
    last2 = load_checkpoint(tmp_path / "last2.pt")["model"]
    assert all(torch.equal(last2[k], avg[k]) for k in avg)
    out = run_mt("translate", "-c", tmp_path / "avg.pt", input="Ein Texteditor.\n").stdout
    assert out.count("\n") == 1


def _scored(proc) -> list[tuple[float, str]]:
    return [(float(score), text) for score, text in (line.split("\t") for line in proc.stdout.splitlines())]


@pytest.mark.int8
def test_translate_quantize_int8_on_the_cpu(trained_tiny):
    """int8 weights move every score, and not far: on the first 40 dev lines of this model the text was the same
    as float32's on every line (runs of one piece: it trained 60 updates) and the scores 0.0039 to 0.015 apart
    (printed to 4 decimals)."""
    lines = ["Dieses Paket enthält die Dokumentation.", "", *(DATA / "dev.de").read_text().splitlines()[:10]]
    text = "\n".join(lines) + "\n"
    args = ["translate", "-c", trained_tiny / "checkpoint_last.pt", "--device", "cpu", "--scores"]
    floats, int8s = _scored(run_mt(*args, input=text)), _scored(run_mt(*args, "--quantize", "int8", input=text))
    assert len(int8s) == len(lines) and all(score <= 0 for score, _ in int8s)
    same = [(f, q) for (f, f_text), (q, q_text), line in zip(floats, int8s, lines) if f_text == q_text and line]
    assert len(same) >= len(lines) - 2 and all(1e-4 <= abs(f - q) < 0.05 for f, q in same)
    bad = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--quantize", "int4", input="x\n",
                 check=False)
    assert bad.returncode == 1 and bad.stderr.strip() == "error: --quantize: only int8 is supported, got 'int4'"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_translate_on_a_missing_gpu_names_the_option(trained_tiny):
    proc = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--device", "cuda", input="Hallo\n",
                  check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "error: --device is cuda but no CUDA device is available"
