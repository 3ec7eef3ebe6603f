"""LibreTranslate's models both ways: `mt export --format argos` installed and run by a real argostranslate and
LibreTranslate (the Makefile's .venv-lt, offline: scripts/libretranslate_offline.py), and `mt import` of
CTranslate2 directories (mt's own exports, CTranslate2's converter of Hugging Face Marian models) and Argos
packages, decoded by mt and by CTranslate2."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
import zipfile

import pytest
import torch

from tests.conftest import ROOT, TINY, one_error_line, run_mt, tiny_overrides
from tests.marian_models import LINES, few_words_model, make_marian

sys.path.insert(0, str(ROOT / "scripts"))
try:
    import libretranslate_offline as lt  # an install of its own per home, offline
finally:
    sys.path.remove(str(ROOT / "scripts"))
# argostranslate's CTranslate2 call (argostranslate/translate.py): beam 4, length_penalty 0.2, CTranslate2's
# max_decoding_length 256; mt's CTranslate2 backend passes --alpha as length_penalty.
ARGOS_SETTINGS = ("--beam-size", "4", "--alpha", "0.2", "--max-len-a", "0", "--max-len-b", "256")
ONE_SENTENCE = [line for line in LINES if len(re.split(r"(?<=[.!?])\s+", line.strip())) == 1][:25]


@pytest.fixture(scope="module")
def package(spm_models, tmp_path_factory):
    """(an Argos package, a LibreTranslate home where argostranslate installed it) of a small model that writes a
    few pieces before ending, also with argostranslate's mild length penalty (tests/marian_models.py)."""
    folder = tmp_path_factory.mktemp("argos")
    few_words_model(folder, spm_models["both"])
    run_mt("export", "-c", folder / "model.pt", "--format", "argos", "--source-lang", "de", "--target-lang", "en",
           "-o", folder / "small.argosmodel")
    lt.call(folder / "home", "install", folder / "small.argosmodel")
    return folder / "small.argosmodel", folder / "home"


def test_argostranslate_translates_an_exported_package_as_mt_does_with_its_settings(package, tmp_path):
    archive, home = package
    installed = home / "packages" / "translate-de_en-1_0"
    assert json.loads((installed / "metadata.json").read_text())["from_code"] == "de"
    theirs = lt.call(home, "translate", "de", "en", input="\n".join(ONE_SENTENCE) + "\n").splitlines()
    ours = run_mt("translate", "-c", installed / "model", *ARGOS_SETTINGS,
                  input="\n".join(ONE_SENTENCE) + "\n").stdout.splitlines()
    # argostranslate turns every "_" into a space, and its CTranslate2 call keeps min_decoding_length 1 (mt allows
    # an empty translation): those lines aside, each line is the same.
    compared = [(a, b.replace("_", " ")) for a, b in zip(theirs, ours) if b]
    same = sum(a == b for a, b in compared)
    print(f"argostranslate equals mt translate with its settings on {same} of {len(compared)} lines "
          f"({len(ONE_SENTENCE) - len(compared)} empty in mt's)")
    assert len(theirs) == len(ONE_SENTENCE) and len(compared) >= 0.8 * len(ONE_SENTENCE)
    assert [a for a, _ in compared] == [b for _, b in compared]


def test_libretranslate_serves_an_exported_package(package, tmp_path):
    archive, home = package
    port = _free_port()
    log = open(tmp_path / "lt.log", "w")
    proc = subprocess.Popen([str(lt.PYTHON), lt.__file__, "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--load-only", "de,en"], env=lt.environment(home), stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}"
        languages = _wait_json(url + "/languages", proc, tmp_path / "lt.log")
        assert {lang["code"] for lang in languages} == {"de", "en"}
        line = ONE_SENTENCE[0]
        request = urllib.request.Request(url + "/translate", data=json.dumps(
            {"q": line, "source": "de", "target": "en", "format": "text"}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            served = json.load(response)["translatedText"]
        assert served == lt.call(home, "translate", "de", "en", input=line + "\n").strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def test_an_mt_export_imported_back_is_the_same_model(trained_tiny, tmp_path):
    checkpoint = trained_tiny / "checkpoint_last.pt"
    run_mt("export", "-c", checkpoint, "-o", tmp_path / "ct2")
    run_mt("import", tmp_path / "ct2", "-o", tmp_path / "back.pt")
    before, after = (torch.load(p, weights_only=True) for p in (checkpoint, tmp_path / "back.pt"))
    weights = before["ema_model"] if before.get("ema_model") is not None else before["model"]
    assert weights.keys() == after["model"].keys()
    assert all(torch.equal(weights[k], after["model"][k]) for k in weights)
    assert torch.equal(before["src_tokenizer"], after["src_tokenizer"])
    lines = "\n".join(LINES) + "\n"
    assert run_mt("translate", "-c", tmp_path / "back.pt", input=lines).stdout == \
        run_mt("translate", "-c", checkpoint, input=lines).stdout


@pytest.mark.int8
def test_an_argos_package_imports_fine_tunes_and_records_its_languages(package, tmp_path):
    """The int8 package de-quantized: greedy output beside CTranslate2's int8 decoding of the same package, then
    two updates of fine-tuning from it (train.init_from)."""
    archive, _ = package
    proc = run_mt("import", archive, "-o", tmp_path / "imported.pt")
    assert "tokenizer:" in proc.stdout and "model:" in proc.stdout
    config = torch.load(tmp_path / "imported.pt", weights_only=True)["config"]
    assert (config["data"]["src_lang"], config["data"]["tgt_lang"]) == ("de", "en")
    with zipfile.ZipFile(archive) as z:
        z.extractall(tmp_path / "unpacked")
    lines = "\n".join(LINES) + "\n"
    ours = run_mt("translate", "-c", tmp_path / "imported.pt", "--beam-size", "1", input=lines).stdout.splitlines()
    theirs = run_mt("translate", "-c", tmp_path / "unpacked" / "translate-de_en-1_0" / "model", "--beam-size", "1",
                    input=lines).stdout.splitlines()
    same = sum(a == b for a, b in zip(ours, theirs))
    print(f"int8 package: mt's de-quantized greedy output equals CTranslate2's int8 on {same} of {len(LINES)} lines")
    assert same >= 0.5 * len(LINES)
    sections = __import__("yaml").safe_load(proc.stdout)
    sets = [f"{part}.{k}={json.dumps(v)}" for part in ("model", "tokenizer") for k, v in sections[part].items()]
    sets += [f"train.init_from={tmp_path / 'imported.pt'}", "train.max_steps=2", "train.eval_every=2"]
    run_mt("train", TINY, *tiny_overrides(tmp_path / "tuned"), *[a for s in sets for a in ("--set", s)])
    assert (tmp_path / "tuned" / "checkpoint_last.pt").is_file()


@pytest.mark.int8
@pytest.mark.parametrize("quantization", [None, "int8"])
def test_a_marian_model_converted_by_ctranslate2_decodes_as_ctranslate2_does(spm_models, tmp_path,
                                                                              quantization):
    """mt imports the converted weights (int8 ones de-quantized) and decodes in float32; CTranslate2 is asked for
    float32 too (compute_type float32 de-quantizes int8 weights at load), so both do the same arithmetic on the same
    weights and must agree. CTranslate2's own int8 products are another arithmetic, which saturates on a CPU
    without VNNI (mt/decoding/ct2_model_bin.py): those are measured against float32 in tests/interop/test_ctranslate2.py."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    make_marian(tmp_path / "hf", spm_models["de"], spm_models["en"], "swish")
    TransformersConverter(str(tmp_path / "hf"), copy_files=["source.spm", "target.spm"]).convert(
        str(tmp_path / "ct2"), quantization=quantization)
    run_mt("import", tmp_path / "ct2", "-o", tmp_path / "model.pt")
    ours = run_mt("translate", "-c", tmp_path / "model.pt", "--beam-size", "4", "--alpha", "0", "--max-len-a", "0",
                  "--max-len-b", "30", input="\n".join(LINES) + "\n").stdout.splitlines()
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu", compute_type="float32")
    from mt.decoding.model_backend import load_model_translator

    tr = load_model_translator(tmp_path / "model.pt", "cpu")
    sources = [tr.src_tokenizer.sp.encode(line, out_type=str) + ["</s>"] for line in LINES]
    results = translator.translate_batch(sources, beam_size=4, length_penalty=0.0, min_decoding_length=0,
                                         max_decoding_length=31, return_end_token=True)
    ended = [i for i, r in enumerate(results) if r.hypotheses[0][-1:] == ["</s>"]]
    theirs = [tr.tgt_tokenizer.sp.decode_pieces(r.hypotheses[0][:-1]) for r in results]
    same = sum(ours[i] == theirs[i] for i in ended)
    print(f"{quantization or 'float32'}: mt's beam-4 output equals CTranslate2's on {same} of {len(ended)} lines that "
          f"end before the limit ({len(LINES)} in all)")
    assert len(ended) >= 0.5 * len(LINES)  # a search that reaches the limit ends differently in each (tests/interop/test_marian.py)
    assert same == len(ended)


def test_a_model_mt_cannot_represent_is_refused_naming_the_option(spm_models, tmp_path):
    """A Marian model with GELU activations through CTranslate2's converter."""
    from ctranslate2.converters import TransformersConverter

    make_marian(tmp_path / "hf", spm_models["de"], spm_models["en"], "gelu")
    TransformersConverter(str(tmp_path / "hf"), copy_files=["source.spm", "target.spm"]).convert(str(tmp_path / "ct2"))
    line = one_error_line(run_mt("import", tmp_path / "ct2", "-o", tmp_path / "out.pt", check=False))
    assert line == f"error: {tmp_path / 'ct2' / 'model.bin'}: activation GELU: mt has ReLU and swish"
    assert not (tmp_path / "out.pt").exists()


def _zip(path, members: dict[str, bytes]):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


def _encrypted(path):
    """A member whose headers say it is encrypted (bit 0 of the flags; Python's zipfile cannot encrypt)."""
    data = bytearray(_zip(path, {"pkg/metadata.json": _metadata()}).read_bytes())
    for signature, at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the local and the central header
        data[data.index(signature) + at] |= 0x1
    path.write_bytes(bytes(data))


def _metadata(**fields) -> bytes:
    return json.dumps({"type": "translate", "from_code": "de", "to_code": "en", **fields}).encode()


def test_bad_packages_are_one_line_each_and_write_nothing(tmp_path):
    cases = {
        "not-a-zip.argosmodel": (lambda p: p.write_bytes(b"PK\x03\x04 not really"),
                                 "not a zip archive, so not an Argos package (.argosmodel)"),
        "no-metadata.argosmodel": (lambda p: _zip(p, {"pkg/model/model.bin": b"x"}),
                                   "no metadata.json, so not an Argos package"),
        "sbd.argosmodel": (lambda p: _zip(p, {"pkg/metadata.json": _metadata(type="sbd")}),
                           "a package of type 'sbd'; mt imports translation packages (type 'translate')"),
        "no-from.argosmodel": (lambda p: _zip(p, {"pkg/metadata.json": b'{"type": "translate", "to_code": "en"}'}),
                               "no from_code; an Argos translation package names from_code, to_code"),
        "escape.argosmodel": (lambda p: _zip(p, {"pkg/../../evil.txt": b"x"}),
                              "member 'pkg/../../evil.txt' would be written outside the folder it unpacks into"),
        "bomb.argosmodel": (lambda p: _zip(p, {"pkg/metadata.json": _metadata(),
                                               "pkg/model/model.bin": bytes(20 << 20)}),
                            "member 'pkg/model/model.bin' unpacks"),
        "no-model.argosmodel": (lambda p: _zip(p, {"pkg/metadata.json": _metadata()}),
                                "no model/model.bin; an Argos translation package holds a CTranslate2 model there"),
        "encrypted.argosmodel": (_encrypted, "member 'pkg/metadata.json' is encrypted"),
        "empty-folder": (lambda p: p.mkdir(), "none of a Hugging Face Marian or M2M100 directory (config.json), "
                         "a CTranslate2 model (model.bin) and an Argos package (metadata.json)"),
    }
    for name, (make, message) in cases.items():
        make(tmp_path / name)
        line = one_error_line(run_mt("import", tmp_path / name, "-o", tmp_path / "out.pt", check=False))
        assert message in line, line
        print(line)
        assert not (tmp_path / "out.pt").exists() and not (tmp_path.parent / "evil.txt").exists()


def test_export_refuses_to_overwrite_a_package_or_its_input(package, trained_tiny, tmp_path):
    archive, _ = package
    checkpoint = trained_tiny / "checkpoint_last.pt"
    (tmp_path / "mine.argosmodel").write_bytes(archive.read_bytes())
    before = (tmp_path / "mine.argosmodel").read_bytes()
    line = one_error_line(run_mt("export", "-c", checkpoint, "--format", "argos", "-o", tmp_path / "mine.argosmodel",
                                 check=False))
    assert line == f"error: -o {tmp_path / 'mine.argosmodel'}: exists; remove it or pass --force"
    (tmp_path / "notes.txt").write_text("mine")
    line = one_error_line(run_mt("export", "-c", checkpoint, "--format", "argos", "-o", tmp_path / "notes.txt",
                                 "--force", check=False))
    assert line.endswith("is not an Argos package; --force replaces only an earlier package")
    line = one_error_line(run_mt("export", "-c", checkpoint, "--format", "argos", "-o", checkpoint, check=False))
    assert "holds the input -c" in line or "is also the input" in line, line
    assert (tmp_path / "mine.argosmodel").read_bytes() == before and (tmp_path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine.argosmodel", "notes.txt"]


def test_a_full_disk_leaves_no_package(trained_tiny, tmp_path):
    import resource
    import sys

    out = tmp_path / "out"
    out.mkdir()
    limit = 200_000
    proc = subprocess.run([sys.executable, "-m", "mt", "export", "-c", str(trained_tiny / "checkpoint_last.pt"),
                           "--format", "argos", "--quantization", "float32", "-o", str(out / "x.argosmodel")],
                          capture_output=True, text=True, cwd=ROOT,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    assert one_error_line(proc) == f"error: -o {out / 'x.argosmodel'}: File too large"
    assert list(out.iterdir()) == []


def test_a_packed_sentence_splitter_is_the_one_argostranslate_uses(trained_tiny, tmp_path):
    (tmp_path / "de.onnx").write_bytes(b"a MiniSBD model")
    run_mt("export", "-c", trained_tiny / "checkpoint_last.pt", "--format", "argos", "--sentence-splitter",
           tmp_path / "de.onnx", "-o", tmp_path / "p.argosmodel")
    home = tmp_path / "home"
    lt.call(home, "install", tmp_path / "p.argosmodel")
    script = ("import argostranslate.package as p, argostranslate.sbd as s; "
              "print(s.MiniSBDSentencizer(p.get_installed_packages()[0]).lang)")
    proc = subprocess.run([str(lt.PYTHON), "-c", script], capture_output=True, text=True, env=lt.environment(home),
                          timeout=120)
    assert proc.stdout.strip() == str(home / "packages" / "translate-de_en-1_0" / "minisbd" / "de.onnx"), proc.stderr


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_json(url: str, proc: subprocess.Popen, log) -> object:
    deadline = time.time() + 240
    while time.time() < deadline:
        assert proc.poll() is None, f"LibreTranslate exited with {proc.returncode}:\n{log.read_text()[-2000:]}"
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.load(response)
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"LibreTranslate not ready in 240 s:\n{log.read_text()[-2000:]}")


@pytest.mark.parametrize("page", ["exporting.md", "pretrained.md"])
def test_the_documented_install_command_installs_a_package_file(package, tmp_path, page):
    """The command docs/PAGE gives to install an .argosmodel file, run by the .venv-lt's Python in a home of its
    own: the package is installed (`argospm install` takes index names only)."""
    archive, _ = package
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    commands = re.findall(r"^python -c '(.*install_from_path\(\"([^\"]+)\"\).*)'$", text, re.MULTILINE)
    assert commands, f"docs/{page}: no install command for a package file"
    for code, name in commands:
        (tmp_path / name).write_bytes(archive.read_bytes())
        home = tmp_path / "home"
        done = subprocess.run([str(lt.PYTHON), "-c", code], cwd=tmp_path, env=lt.environment(home),
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert json.loads((home / "packages" / "translate-de_en-1_0" / "metadata.json").read_text())["to_code"] == "en"
