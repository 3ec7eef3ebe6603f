"""train.ema_decay: the moving average of the weights, its checkpoint key, exact resume, and which weights the
commands use."""

import torch

from mt.decoding.model_backend import load_model_translator
from mt.checkpoint import load_checkpoint
from mt.data.corpus import encode_corpus
from mt.data.parallel_text import read_parallel
from mt.training.ema import WeightAverage, effective_decay
from mt.training.evaluation import dev_loss
from tests.conftest import DATA, TINY, read_metrics, run_mt, tiny_overrides


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


def test_the_average_is_saved_resumed_exactly_and_scored_at_evaluation(tmp_path):
    run_mt("train", TINY, *_ema_run(tmp_path / "whole"))
    split = _ema_run(tmp_path / "split")
    run_mt("train", TINY, *split, "--set", "train.max_steps=6")
    run_mt("train", TINY, *split)
    whole, resumed = (load_checkpoint(tmp_path / name / "checkpoint_last.pt") for name in ("whole", "split"))
    assert [r["loss"] for r in read_metrics(tmp_path / "whole")] == [r["loss"] for r in read_metrics(tmp_path / "split")]
    for name, value in whole["ema_model"].items():
        assert torch.equal(value, resumed["ema_model"][name]), name
    moved = [name for name, value in whole["ema_model"].items() if not torch.equal(value, whole["model"][name])]
    assert len(moved) > 10, "the average differs from the last update's weights"

    # The dev evaluation scored the averaged weights, not the trained ones.
    tr = load_model_translator(tmp_path / "whole" / "checkpoint_last.pt", "cpu")
    raw = load_model_translator(tmp_path / "whole" / "checkpoint_last.pt", "cpu", raw_weights=True)
    dev, _ = encode_corpus(*read_parallel(DATA / "dev.de", DATA / "dev.en"), tr.src_tokenizer, tr.tgt_tokenizer, None)
    logged = read_metrics(tmp_path / "whole", "dev")[-1]["loss"]
    averaged_loss, trained_loss = (round(dev_loss(t.backend.model, dev, 2048, "cpu")[0], 4) for t in (tr, raw))
    assert logged == averaged_loss != trained_loss


def test_translate_average_and_fine_tuning_use_the_average_unless_asked_for_raw_weights(tmp_path):
    run_mt("train", TINY, *_ema_run(tmp_path / "run"))
    path = tmp_path / "run" / "checkpoint_last.pt"
    ckpt = load_checkpoint(path)
    chosen = load_model_translator(path, "cpu").backend.model.state_dict()
    raw = load_model_translator(path, "cpu", raw_weights=True).backend.model.state_dict()
    assert all(torch.equal(chosen[k], ckpt["ema_model"][k]) and torch.equal(raw[k], ckpt["model"][k]) for k in chosen)

    run_mt("average", tmp_path / "run" / "checkpoint_6.pt", path, "-o", tmp_path / "avg.pt")
    run_mt("average", tmp_path / "run" / "checkpoint_6.pt", path, "-o", tmp_path / "avg-raw.pt", "--raw-weights")
    first = load_checkpoint(tmp_path / "run" / "checkpoint_6.pt")
    averaged, averaged_raw = load_checkpoint(tmp_path / "avg.pt"), load_checkpoint(tmp_path / "avg-raw.pt")
    assert "ema_model" not in averaged
    for k in ckpt["model"]:
        assert torch.allclose(averaged["model"][k], (first["ema_model"][k] + ckpt["ema_model"][k]) / 2, atol=1e-6)
        assert torch.allclose(averaged_raw["model"][k], (first["model"][k] + ckpt["model"][k]) / 2, atol=1e-6)

    ema_text = run_mt("translate", "-c", path, "--beam-size", "1", input="Ein kleines Programm.\n").stdout
    raw_text = run_mt("translate", "-c", path, "--beam-size", "1", "--raw-weights",
                      input="Ein kleines Programm.\n").stdout
    assert ema_text.count("\n") == raw_text.count("\n") == 1

    tuned = run_mt("train", TINY, *tiny_overrides(tmp_path / "tuned", **{
        "train.init_from": path, "train.max_steps": 1, "train.eval_every": 100}))
    assert "fine-tuning: weights (its moving average) of" in tuned.stderr
