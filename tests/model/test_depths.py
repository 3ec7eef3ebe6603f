"""model.encoder_layers and model.decoder_layers: a 3-encoder, 1-decoder model through every path that builds,
stores or converts a model (training and exact resume, `mt info`, CTranslate2 export, averaging, ensembles; the
import of a Marian model of uneven depths is in tests/interop/test_marian.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.config import ModelConfig, config_from_dict, config_to_dict, model_settings
from mt.model.transformer import build_model
from tests.conftest import DATA, TINY, run_mt, tiny_overrides

# No dev set: evaluating an untrained model's beam search over it would take most of the test's time.
DEPTHS = {"model.encoder_layers": 3, "model.decoder_layers": 1, "train.save_every": 10, "data.dev_src": "null",
          "data.dev_tgt": "null"}
LINES = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:60]
GREEDY = ["--beam-size", "1", "--max-len-a", "0", "--max-len-b", "12", "--device", "cpu"]


@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    """The tiny config with a 3-layer encoder and a 1-layer decoder, 20 updates."""
    out = tmp_path_factory.mktemp("uneven")
    run_mt("train", TINY, *tiny_overrides(out, **DEPTHS, **{"train.max_steps": 20}))
    return out


def _translate(checkpoints, lines=LINES) -> list[str]:
    args = [a for c in checkpoints for a in ("-c", c)]
    return run_mt("translate", *args, *GREEDY, input="\n".join(lines) + "\n").stdout.splitlines()


def test_depths_default_to_n_layers_and_old_checkpoints_mean_what_they_meant():
    assert (ModelConfig(n_layers=4).encoder_layers, ModelConfig(n_layers=4).decoder_layers) == (4, 4)
    old = {"d_model": 64, "n_layers": 3}  # a checkpoint's model section from before the two keys
    assert model_settings(old)["encoder_layers"] == model_settings(old)["decoder_layers"] == 3


def test_the_model_has_the_depths_asked_for_and_info_says_so(uneven):
    state = load_checkpoint(uneven / "checkpoint_last.pt")["model"]
    layers = {side: {k.split(".")[1] for k in state if k.startswith(f"{side}_layers.")}
              for side in ("encoder", "decoder")}
    assert layers == {"encoder": {"0", "1", "2"}, "decoder": {"0"}}
    info = run_mt("info", uneven / "checkpoint_last.pt").stdout
    assert "layers: 3 encoder + 1 decoder" in info


def test_a_run_of_uneven_depths_resumes_exactly(uneven, tmp_path):
    run_mt("train", TINY, *tiny_overrides(tmp_path, **DEPTHS, **{"train.max_steps": 10}))
    resumed = run_mt("train", TINY, *tiny_overrides(tmp_path, **DEPTHS, **{"train.max_steps": 20}))
    assert "at step 10" in resumed.stderr
    a, b = (load_checkpoint(run / "checkpoint_last.pt")["model"] for run in (uneven, tmp_path))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_checkpoint_without_the_depth_keys_resumes_as_before(tmp_path):
    """A run saved before the keys existed: its stored model section lacks them, and resuming it is allowed."""
    run = tmp_path / "old"
    settings = {"train.save_every": 2, "data.dev_src": "null", "data.dev_tgt": "null"}
    run_mt("train", TINY, *tiny_overrides(run, **settings, **{"train.max_steps": 2}))
    ckpt = load_checkpoint(run / "checkpoint_last.pt")
    for key in ("encoder_layers", "decoder_layers"):
        del ckpt["config"]["model"][key]
    save_checkpoint(run / "checkpoint_last.pt", ckpt)
    resumed = run_mt("train", TINY, *tiny_overrides(run, **settings, **{"train.max_steps": 3}))
    assert "at step 2" in resumed.stderr
    assert config_from_dict(ckpt["config"]).model.decoder_layers == 2


def test_the_ctranslate2_export_decodes_greedily_as_mt_does(uneven, tmp_path):
    run_mt("export", "-c", uneven / "checkpoint_last.pt", "-o", tmp_path / "ct2")
    assert _translate([tmp_path / "ct2"]) == _translate([uneven / "checkpoint_last.pt"])


def test_checkpoints_of_uneven_depths_average(uneven, tmp_path):
    run_mt("average", uneven / "checkpoint_10.pt", uneven / "checkpoint_20.pt", "-o", tmp_path / "avg.pt")
    a, b, avg = (load_checkpoint(p)["model"] for p in
                 (uneven / "checkpoint_10.pt", uneven / "checkpoint_20.pt", tmp_path / "avg.pt"))
    name = "decoder_layers.0.ffn.w1.weight"
    assert torch.allclose(avg[name], (a[name] + b[name]) / 2)
    assert len(_translate([tmp_path / "avg.pt"], LINES[:5])) == 5


def _deep_decoder(uneven, path):
    """A random model with the run's tokenizers and the other shape: a 1-layer encoder, a 3-layer decoder."""
    ckpt = load_checkpoint(uneven / "checkpoint_last.pt")
    cfg = config_from_dict(ckpt["config"])
    cfg = replace(cfg, model=replace(cfg.model, encoder_layers=1, decoder_layers=3))
    torch.manual_seed(0)
    vocab = ckpt["model"]["src_embed.tokens.weight"].shape[0]
    model = build_model(cfg.model, vocab, vocab, cfg.tokenizer.joint)
    save_checkpoint(path, {**{k: ckpt[k] for k in ("src_tokenizer", "tgt_tokenizer", "step")},
                           "config": config_to_dict(cfg), "model": model.state_dict()})
    return path


def test_ensembles_of_uneven_depths_translate_as_their_members_do(uneven, tmp_path):
    """The members' decoder layers share one cache, each member reading its own: a model with itself translates
    as the model alone, and members of depths 1 and 3 give the same lines in either order."""
    last, deep = uneven / "checkpoint_last.pt", _deep_decoder(uneven, tmp_path / "deep.pt")
    assert _translate([last, last]) == _translate([last])
    assert _translate([last, deep]) == _translate([deep, last])
