"""What a user is told: characters a model cannot write, damaged checkpoints, YAML that is valid, a busy port,
an empty prepare; each a warning or one line naming the file, key or option, never a traceback."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest
import torch

from mt.config import load_config
from tests.conftest import ROOT, TINY, run_mt
from tests.faults.conftest import fails_cleanly


@pytest.fixture(scope="module")
def model(trained_tiny):
    return trained_tiny / "checkpoint_last.pt"


@pytest.mark.parametrize("mode, line, part", [("--prefix", "Hallo\tDas 😀 ist שלום", "target prefix"),
                                              ("--constraints", "Hallo\t中文", "constraint term")])
def test_characters_the_target_vocabulary_lacks_are_named_in_a_warning(model, mode, line, part):
    proc = run_mt("translate", "-c", model, mode, input=line + "\n")
    warning = [w for w in proc.stderr.splitlines() if w.startswith("warning:")]
    assert len(warning) == 1 and part in warning[0] and "input line 1" in warning[0]
    unknown = "😀 ש ל ו ם" if mode == "--prefix" else "中 文"
    assert f"({unknown})" in warning[0]


def test_a_prefix_in_the_vocabulary_gives_no_warning(model):
    assert "warning" not in run_mt("translate", "-c", model, "--prefix", input="Hallo\tThe\n").stderr


def test_an_empty_source_with_a_prefix_is_decoded_from_its_prefix(model):
    out = run_mt("translate", "-c", model, "--prefix", input="\tThis package\n\n").stdout.splitlines()
    assert out[0].startswith("This package") and out[1] == ""


def test_a_checkpoint_without_model_weights_is_one_line(model, tmp_path):
    ckpt = torch.load(model, weights_only=True)
    del ckpt["model"]
    torch.save(ckpt, tmp_path / "broken.pt")
    for args in (["translate", "-c", tmp_path / "broken.pt"], ["info", tmp_path / "broken.pt"],
                 ["export", "-c", tmp_path / "broken.pt", "-o", tmp_path / "out"]):
        line = fails_cleanly(run_mt(*args, check=False, input="Hallo\n"), tmp_path / "broken.pt")
        assert "holds no model" in line


def test_weights_that_do_not_fit_the_stored_config_are_one_line(model, tmp_path):
    ckpt = torch.load(model, weights_only=True)
    ckpt["config"]["model"]["d_ff"] *= 2
    torch.save(ckpt, tmp_path / "edited.pt")
    line = fails_cleanly(run_mt("translate", "-c", tmp_path / "edited.pt", check=False, input="Hallo\n"),
                         tmp_path / "edited.pt")
    assert "do not fit" in line and "size mismatch" in line


def test_a_corrupt_checkpoint_last_names_the_newest_intact_step_checkpoint(tmp_path):
    from tests.conftest import tiny_overrides

    args = tiny_overrides(tmp_path, **{"train.max_steps": 4, "train.save_every": 2, "train.eval_every": 100})
    run_mt("train", TINY, *args)
    last = tmp_path / "checkpoint_last.pt"
    last.write_bytes(last.read_bytes()[:1000])
    (tmp_path / "checkpoint_4.pt").write_bytes(b"torn")
    line = fails_cleanly(run_mt("train", TINY, *args, "--set", "train.max_steps=6", check=False), last)
    assert "truncated or corrupt" in line and str(tmp_path / "checkpoint_2.pt") in line
    assert "PytorchStreamReader" not in line


def test_yaml_merge_keys_and_a_dotless_exponent_are_read_as_meant(tmp_path):
    """A merged mapping gives its keys where the mapping has none of its own (its own win, as YAML's merge key
    says), and `1e-3`, which YAML 1.1 reads as a string, is the number."""
    config = tmp_path / "c.yaml"
    config.write_text("model: &m\n  d_model: 64\n  n_heads: 4\ndecode:\n  beam_size: 2\n"
                      "train:\n  lr_scale: 1e-3\n  <<: {warmup_steps: 10, lr_scale: 5.0, seed: 7}\n")
    proc = run_mt("info", config, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "d_model: 64  d_ff: 2048  heads: 4 (d_k = 16)" in proc.stdout.splitlines()
    cfg = load_config(config)
    assert (cfg.train.warmup_steps, cfg.train.seed, cfg.train.lr_scale) == (10, 7, 1e-3)
    assert (cfg.model.d_model, cfg.model.n_heads, cfg.decode.beam_size) == (64, 4, 2)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_a_non_finite_number_is_a_config_error(value):
    fails_cleanly(run_mt("info", TINY, "--set", f"train.lr_scale={value}", check=False), "train.lr_scale", "finite")


def test_a_busy_port_is_one_line_before_any_model_loads(model):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = run_mt("serve", "-m", f"de:en={model}", "--port", port, check=False, timeout=120)
    line = fails_cleanly(proc, f"--port {port}")
    assert "in use" in line and "mt serve: de-en" not in proc.stderr


def test_info_of_an_exported_directory_describes_it(model, tmp_path):
    run_mt("export", "-c", model, "-o", tmp_path / "exported")
    out = run_mt("info", tmp_path / "exported").stdout
    assert "parameters:" in out and "sentencepiece models" in out
    fails_cleanly(run_mt("info", tmp_path, check=False), tmp_path, "not a CTranslate2 export (no mt.yaml)")


def test_a_hugging_face_export_given_as_a_model_names_what_the_command_needs(model, tmp_path):
    """`mt export --format huggingface` writes a folder for transformers, not for mt's commands: they say what
    they need (it was called a folder "not written by `mt export`")."""
    run_mt("export", "-c", model, "--format", "huggingface", "-o", tmp_path / "hf")
    (tmp_path / "src.de").write_text("Hallo Welt\n")
    (tmp_path / "tgt.en").write_text("Hello world\n")
    for args in (["score", "-c", tmp_path / "hf", "--src", tmp_path / "src.de", "--tgt", tmp_path / "tgt.en"],
                 ["serve", "-m", f"de:en={tmp_path / 'hf'}", "--port", "0"], ["translate", "-c", tmp_path / "hf"]):
        line = fails_cleanly(run_mt(*args, check=False, input="Hallo\n", timeout=120), tmp_path / "hf")
        assert line.endswith(": not a CTranslate2 export (no mt.yaml); this command needs an mt checkpoint or a "
                             "CTranslate2 export (`mt export --format ctranslate2`)"), line


def test_serve_refuses_an_empty_api_keys_option_and_a_keys_file_with_no_key(model, tmp_path):
    """`--api-keys "$UNSET"` served everyone, and a file of comments only refused everyone: both, silently."""
    line = fails_cleanly(run_mt("serve", "-m", f"de:en={model}", "--port", "0", "--api-keys", "", check=False,
                                 timeout=120))
    assert line == ("error: --api-keys: an empty file name (an unset variable?); give a file of "
                    "`KEY [REQUESTS_PER_MINUTE]` lines, or leave the option out to serve without keys")
    keys = tmp_path / "keys.txt"
    keys.write_text("# keys go here\n\n")
    line = fails_cleanly(run_mt("serve", "-m", f"de:en={model}", "--port", "0", "--api-keys", keys, check=False,
                                 timeout=120))
    assert line == (f"error: --api-keys {keys}: no keys in it, so every request would be refused; write one "
                    "`KEY [REQUESTS_PER_MINUTE]` a line")


@pytest.mark.parametrize("module", ["uvicorn", "starlette", "prometheus_client"])
def test_serve_without_its_extra_names_the_extra(model, module):
    """As `mt plot` without matplotlib: one line naming what to install, not a ModuleNotFoundError's traceback."""
    hide = f"import sys; sys.modules[{module!r}] = None; sys.argv = ['mt', 'serve', '-m', 'de:en={model}']; "
    proc = subprocess.run([sys.executable, "-c", hide + "import mt.cli; mt.cli.main()"], capture_output=True,
                          text=True, cwd=ROOT, env={k: v for k, v in os.environ.items() if k != "MT_DEBUG"})
    assert fails_cleanly(proc) == f"error: mt serve needs {module}: pip install 'mt[serve]'"


def test_mt_bench_train_prints_no_mfu_over_100_and_leaves_no_run_folder(tmp_path):
    from mt.training.flops import _device_name

    cache = tmp_path / "cache"
    (cache / "mt").mkdir(parents=True)
    low = {"flops": 1e6, "measured": "2026-01-01"}  # a peak measured under load: far below what any run reaches
    keys = [f"{_device_name(torch.device('cpu'))} | torch.float32 | {n} threads" for n in range(1, 65)]
    (cache / "mt" / "matmul_peak.json").write_text(json.dumps({key: low for key in keys}))
    project = tmp_path / "project"
    project.mkdir()
    proc = subprocess.run([sys.executable, "-m", "mt", "bench", "train", str(TINY), "--steps", "4", "--warmup", "1",
                           "--json", "--set", "output_dir=runs/tiny",
                           "--set", f"data.train_src={ROOT / 'data/ddtp-de-en/sample-2k.de'}",
                           "--set", f"data.train_tgt={ROOT / 'data/ddtp-de-en/sample-2k.en'}",
                           "--set", "data.dev_src=null", "--set", "data.dev_tgt=null"],
                          capture_output=True, text=True, cwd=project,
                          env={**os.environ, "XDG_CACHE_HOME": str(cache), "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    mfu = [result["mfu"], result["reference_mfu"]]
    assert all(0 < m < 1 for m in mfu)  # the faster side beat the stale peak, which was measured again
    peaks = [entry["flops"] for entry in json.loads((cache / "mt" / "matmul_peak.json").read_text()).values()]
    assert sum(peak > 1e6 for peak in peaks) == 1  # this machine's entry replaced, the others kept
    assert not (project / "runs").exists() and list(project.iterdir()) == []


@pytest.mark.parametrize("option, value, says", [
    ("--source-lang", "German", "--source-lang German: not a language code"),
    ("--target-lang", "fr", "--target-lang fr: the model's target language is en (data.train_tgt "),
])
def test_an_argos_export_refuses_a_language_that_is_no_code_or_not_the_models(model, tmp_path, option, value, says):
    package = tmp_path / "de_en.argosmodel"
    line = fails_cleanly(run_mt("export", "-c", model, "--format", "argos", option, value, "-o", package,
                                check=False), option)
    assert line.startswith(f"error: {says}"), line
    assert not package.exists() and list(tmp_path.iterdir()) == []


def test_a_word_document_named_pptx_is_one_line_saying_what_it_is(model, tmp_path):
    import docx

    document = docx.Document()
    document.add_paragraph("Hallo Welt.")
    document.save(tmp_path / "slides.pptx")
    line = fails_cleanly(run_mt("translate", "-c", model, "-i", tmp_path / "slides.pptx", "-o", tmp_path / "out.pptx",
                                check=False))
    assert line == (f"error: {tmp_path / 'slides.pptx'}: a Word document (.docx), not a PowerPoint presentation "
                    "(.pptx); give it its own extension")
    assert not (tmp_path / "out.pptx").exists()


def test_a_damaged_argos_package_is_named_by_its_own_path_and_member(model, tmp_path):
    import zipfile

    package, damaged = tmp_path / "good.argosmodel", tmp_path / "damaged.argosmodel"
    run_mt("export", "-c", model, "--format", "argos", "-o", package)
    with zipfile.ZipFile(package) as source, zipfile.ZipFile(damaged, "w") as target:
        for member in source.infolist():
            data = source.read(member)
            target.writestr(member, data[:1000] if member.filename.endswith("model/model.bin") else data)
    line = fails_cleanly(run_mt("import", damaged, "-o", tmp_path / "imported.pt", check=False))
    assert line.startswith(f"error: {damaged}: translate-de_en-1_0/model/model.bin: not a CTranslate2 model.bin"), line
    assert not (tmp_path / "imported.pt").exists()
