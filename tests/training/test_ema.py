"""train.ema_decay: the moving average of the weights, its checkpoint key, exact resume, and which weights the
commands use."""

from pathlib import Path

import pytest
import torch

from mt.decoding.model_backend import load_model_translator
from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.data.corpus import encode_corpus
from mt.data.text_files import read_parallel
from mt.training.ema import WeightAverage, effective_decay
from mt.training.evaluation import dev_loss
from tests.conftest import TINY, read_metrics, run_mt, small_dev, tiny_overrides


def test_the_average_moves_by_the_effective_decay():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    avg = WeightAverage(model, decay=0.9)
    start = avg.model.weight.clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    avg.update(step=1)  # early updates forget faster: min(0.9, 2 / 11)
    d = effective_decay(0.9, 1)
    assert d == 2 / 11 and torch.allclose(avg.model.weight, d * start + (1 - d) * model.weight)
    assert effective_decay(0.9, 1000) == 0.9
    assert not any(p.requires_grad for p in avg.model.parameters())


def _ema_run(out, **values):
    settings = {"train.ema_decay": 0.9, "train.max_steps": 12, "train.log_every": 1, "train.save_every": 6,
                "train.eval_every": 12, "train.batch_tokens": 512, **values}
    return tiny_overrides(out, **settings)


@pytest.fixture(scope="module")
def ema_run(tmp_path_factory) -> Path:
    """A tiny run of 12 updates with train.ema_decay 0.9, saved at 6 and 12."""
    out = tmp_path_factory.mktemp("ema-run")
    run_mt("train", TINY, *_ema_run(out))
    return out


def _only_weights(ckpt: dict, weights: dict, path: Path) -> Path:
    """`ckpt` with `weights` as its model and no moving average: a checkpoint of those tensors alone."""
    save_checkpoint(path, {**{k: v for k, v in ckpt.items() if k != "ema_model"}, "model": weights})
    return path


def test_the_average_is_saved_resumed_exactly_and_scored_at_evaluation(ema_run, tmp_path):
    split = _ema_run(tmp_path / "split")
    run_mt("train", TINY, *split, "--set", "train.max_steps=6")
    run_mt("train", TINY, *split)
    whole, resumed = (load_checkpoint(folder / "checkpoint_last.pt") for folder in (ema_run, tmp_path / "split"))
    assert [r["loss"] for r in read_metrics(ema_run)] == [r["loss"] for r in read_metrics(tmp_path / "split")]
    for name, value in whole["ema_model"].items():
        assert torch.equal(value, resumed["ema_model"][name]), name
    moved = [name for name, value in whole["ema_model"].items() if not torch.equal(value, whole["model"][name])]
    assert len(moved) > 10, "the average differs from the last update's weights"

    # The dev evaluation scored the averaged weights, not the trained ones.
    tr = load_model_translator(ema_run / "checkpoint_last.pt", "cpu")
    raw = load_model_translator(ema_run / "checkpoint_last.pt", "cpu", raw_weights=True)
    dev, _ = encode_corpus(*read_parallel(small_dev() / "dev.de", small_dev() / "dev.en"), tr.src_tokenizer,
                           tr.tgt_tokenizer, None)  # the dev set tiny_overrides trains with
    logged = read_metrics(ema_run, "dev")[-1]["loss"]
    averaged_loss, trained_loss = (round(dev_loss(t.backend.model, dev, 2048, "cpu")[0], 4) for t in (tr, raw))
    assert logged == averaged_loss != trained_loss


def test_translate_average_and_fine_tuning_use_the_average_unless_asked_for_raw_weights(ema_run, tmp_path):
    path = ema_run / "checkpoint_last.pt"
    ckpt = load_checkpoint(path)
    chosen = load_model_translator(path, "cpu").backend.model.state_dict()
    raw = load_model_translator(path, "cpu", raw_weights=True).backend.model.state_dict()
    assert all(torch.equal(chosen[k], ckpt["ema_model"][k]) and torch.equal(raw[k], ckpt["model"][k]) for k in chosen)

    run_mt("average", ema_run / "checkpoint_6.pt", path, "-o", tmp_path / "avg.pt")
    run_mt("average", ema_run / "checkpoint_6.pt", path, "-o", tmp_path / "avg-raw.pt", "--raw-weights")
    first = load_checkpoint(ema_run / "checkpoint_6.pt")
    averaged, averaged_raw = load_checkpoint(tmp_path / "avg.pt"), load_checkpoint(tmp_path / "avg-raw.pt")
    assert "ema_model" not in averaged
    for k in ckpt["model"]:
        assert torch.allclose(averaged["model"][k], (first["ema_model"][k] + ckpt["ema_model"][k]) / 2, atol=1e-6)
        assert torch.allclose(averaged_raw["model"][k], (first["model"][k] + ckpt["model"][k]) / 2, atol=1e-6)

    # What `mt translate` prints is the chosen tensors' output: the same as a checkpoint holding only them.
    lines = "Ein kleines Programm.\nDieses Paket enthält die Dokumentation.\n"
    translate = ["translate", "-c", path, "--beam-size", "1", "--scores"]
    ema_text, raw_text = (run_mt(*translate, *flag, input=lines).stdout for flag in ((), ("--raw-weights",)))
    assert ema_text != raw_text and len(raw_text.splitlines()) == 2
    for text, weights in ((ema_text, ckpt["ema_model"]), (raw_text, ckpt["model"])):
        alone = _only_weights(ckpt, weights, tmp_path / "alone.pt")
        assert run_mt("translate", "-c", alone, "--beam-size", "1", "--scores", input=lines).stdout == text

    tuned = run_mt("train", TINY, *tiny_overrides(tmp_path / "tuned", **{
        "train.init_from": path, "train.max_steps": 1, "train.eval_every": 100}))
    assert "fine-tuning: weights (its moving average) of" in tuned.stderr


@pytest.mark.parametrize("format, weights", [("ctranslate2", "model.bin"), ("huggingface", "model.safetensors")])
def test_export_writes_the_average_unless_asked_for_raw_weights(ema_run, tmp_path, format, weights):
    """`mt export` writes the moving average, `--raw-weights` the last update's weights: each export's weights
    file is, byte for byte, the export of a checkpoint holding only those tensors."""
    path = ema_run / "checkpoint_last.pt"
    ckpt = load_checkpoint(path)
    alone = {"average": _only_weights(ckpt, ckpt["ema_model"], tmp_path / "average.pt"),
             "raw": _only_weights(ckpt, ckpt["model"], tmp_path / "raw.pt")}
    run_mt("export", "-c", path, "--format", format, "-o", tmp_path / "default")
    run_mt("export", "-c", path, "--format", format, "-o", tmp_path / "raw-weights", "--raw-weights")
    for name, checkpoint in alone.items():
        run_mt("export", "-c", checkpoint, "--format", format, "-o", tmp_path / name)
    names = ("default", "raw-weights", *alone)
    if format == "ctranslate2":
        written = {name: (tmp_path / name / weights).read_bytes() for name in names}

        def differing(a: str, b: str) -> int:  # bytes that differ; a float32 value's last bit may (see below)
            assert len(written[a]) == len(written[b])
            return sum(x != y for x, y in zip(written[a], written[b]))

        assert differing("default", "average") <= 8 and differing("raw", "raw-weights") <= 8
        assert differing("default", "raw") > 1000
        return
    # The Hugging Face export's tensors: one of two runs differed in the last bit of one value (the export
    # recomputes a float32 tensor), so they are compared within float32 rounding.
    from safetensors.torch import load_file

    tensors = {name: load_file(tmp_path / name / weights) for name in names}

    def same(a: str, b: str) -> bool:
        return all(torch.allclose(tensors[a][key], tensors[b][key], rtol=0, atol=1e-6) for key in tensors[a])

    assert same("default", "average") and same("raw", "raw-weights") and not same("default", "raw")
