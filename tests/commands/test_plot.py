"""`mt plot`: the numbers behind each picture, the attention weights captured from the real forward pass,
the images the command writes, its one-line errors; and train.tensorboard."""

from __future__ import annotations

import json
import struct
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from mt.checkpoint import save_checkpoint
from mt.config import Config, ModelConfig, TokenizerConfig, config_to_dict
from mt.decoding.lines import LineIds, translate_ids
from mt.errors import MtError
from mt.masks import CAUSAL, padding_mask, subsequent_mask, target_mask
from mt.model.transformer import build_model, sinusoidal_positions
from mt.commands.plot import plot_attention, plot_curves, plot_mask, plot_positions
from mt.model.transformer import kept_attention_weights
from mt.commands.plot_data import attention_maps, mask_tables, positions_table
from mt.training.run_log import TensorBoardLog, metric_curves
from mt.symbols import BOS, PAD
from mt.data.tokenizer import train_tokenizer
from mt.decoding.loading import load_translator
from tests.conftest import DATA, TINY, read_metrics, run_mt, tiny_overrides

def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


# ---- positions and masks: the tables are the model's own ----

def test_positions_table_is_the_models_table():
    table = positions_table(100, 512)
    assert table.shape == (100, 512)
    assert np.array_equal(table, sinusoidal_positions(100, 512).numpy())
    model = build_model(ModelConfig(d_model=512, n_heads=8, n_layers=1, d_ff=64, max_positions=128), 16, 16, True)
    assert np.array_equal(table, model.src_embed.positions[:100].numpy())


def test_mask_tables_are_the_decoders_masks():
    tables = mask_tables(20, 3)
    assert np.array_equal(tables["subsequent"], subsequent_mask(20)[0, 0].numpy())
    sentence = torch.tensor([[BOS] + list(range(10, 26)) + [PAD] * 3])  # 17 real tokens, 3 padding
    assert np.array_equal(tables["target"], target_mask(sentence)[0, 0].numpy())
    assert not tables["target"][:, 17:].any() and tables["target"][:17, :17].sum() == 17 * 18 // 2
    assert list(mask_tables(5)) == ["subsequent"]


# ---- attention weights: captured from the forward pass the model runs ----

def _padded_batch(vocab: int):
    torch.manual_seed(0)
    src = torch.randint(4, vocab, (3, 7))
    src[1, 5:] = PAD
    src[2, 3:] = PAD
    tgt_in = torch.randint(4, vocab, (3, 6))
    tgt_in[:, 0] = BOS
    tgt_in[0, 4:] = PAD
    return src, tgt_in


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("explicit_target_mask", [True, False])
def test_captured_attention_is_a_distribution_zero_where_masked_and_changes_nothing(norm, explicit_target_mask):
    cfg = ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=2, norm=norm, max_positions=32)
    model = build_model(cfg, 40, 40, True).eval()
    src, tgt_in = _padded_batch(40)
    src_mask = padding_mask(src)  # (B, 1, 1, S)
    tgt_mask = target_mask(tgt_in) if explicit_target_mask else CAUSAL  # causal inside attention
    with torch.no_grad():
        plain = model(src, src_mask, tgt_in, tgt_mask)
        with kept_attention_weights(model):
            kept = model(src, src_mask, tgt_in, tgt_mask)
            weights = {"encoder": [layer.self_attn.weights for layer in model.encoder_layers],
                       "decoder": [layer.self_attn.weights for layer in model.decoder_layers],
                       "cross": [layer.cross_attn.weights for layer in model.decoder_layers]}
    assert torch.allclose(kept, plain, atol=1e-5, rtol=0), (kept - plain).abs().max()
    causal = subsequent_mask(tgt_in.size(1))
    allowed = {"encoder": src_mask.expand(3, 1, 7, 7), "cross": src_mask.expand(3, 1, 6, 7),
               "decoder": (tgt_mask if explicit_target_mask else causal).expand(3, 1, 6, 6)}
    for name, per_layer in weights.items():
        for w in per_layer:
            assert w.shape[:2] == (3, 4)
            assert torch.allclose(w.sum(-1), torch.ones(w.shape[:-1]), atol=1e-6)
            assert (w.masked_select(~allowed[name]) == 0).all(), name  # exactly 0, not merely small
    assert all(m.weights is None and not m.keep_weights
               for layer in model.decoder_layers for m in (layer.self_attn, layer.cross_attn))


@pytest.fixture(scope="module")
def random_checkpoint(tmp_path_factory) -> Path:
    """An untrained model with a small sentencepiece vocabulary: enough to look at its attention."""
    lines = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()[:500]
    lines += (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()[:500]
    tok_cfg = TokenizerConfig(vocab_size=300)
    tokenizer = train_tokenizer(lines, tok_cfg)
    cfg = Config(tokenizer=tok_cfg, model=ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=2, max_positions=24))
    torch.manual_seed(0)
    model = build_model(cfg.model, len(tokenizer), len(tokenizer), True)
    path = tmp_path_factory.mktemp("random-model") / "model.pt"
    save_checkpoint(path, {"config": config_to_dict(cfg), "model": model.state_dict(), "step": 0,
                           "src_tokenizer": tokenizer.to_tensor(), "tgt_tokenizer": tokenizer.to_tensor()})
    return path


def test_attention_maps_of_a_sentence(random_checkpoint):
    tr = load_translator(random_checkpoint, "cpu")
    maps = attention_maps(tr, "Ein einfacher Texteditor.", "A simple text editor.")
    assert maps.src_pieces[-1] == "</s>" and maps.tgt_pieces[0] == "<s>"
    assert "".join(maps.tgt_pieces[1:]).replace("\u2581", " ").strip() == "A simple text editor."
    s, t = len(maps.src_pieces), len(maps.tgt_pieces)
    assert [w.shape for w in maps.encoder] == [(4, s, s)] * 2
    assert [w.shape for w in maps.decoder] == [(4, t, t)] * 2
    assert [w.shape for w in maps.cross] == [(4, t, s)] * 2
    for w in maps.encoder + maps.decoder + maps.cross:
        assert np.allclose(w.sum(-1), 1.0, atol=1e-6)
    for w in maps.decoder:
        assert (np.triu(w, k=1) == 0).all()
    greedy = attention_maps(tr, "Ein einfacher Texteditor.")  # no target: the model's own greedy translation
    src_ids = tr.src_tokenizer.encode(["Ein einfacher Texteditor."])[0]
    d = tr.cfg.decode
    own = translate_ids(tr.backend, [LineIds(src_ids)], replace(d, beam_size=1, batch_tokens=100))[0][0].tokens
    assert greedy.tgt_pieces == ["<s>"] + [tr.tgt_tokenizer.sp.id_to_piece(i) for i in own]
    assert greedy.src_pieces == maps.src_pieces


# ---- curves: every row of a resumed run once ----

def test_curves_keep_the_last_row_of_a_repeated_step(tmp_path):
    rows = [{"step": 10, "split": "train", "nll": 5.0, "lr": 1e-3}, {"step": 20, "split": "train", "nll": 4.0, "lr": 2e-3},
            {"step": 20, "split": "dev", "loss": 4.5, "bleu": 1.0},
            {"step": 20, "split": "train", "nll": 3.9, "lr": 2e-3},  # a resume that logged step 20 again
            {"step": 30, "split": "train", "nll": 3.5, "lr": 1.5e-3}, {"step": 30, "split": "dev", "loss": 4.0, "bleu": 2.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    curves = metric_curves(tmp_path)
    assert curves["train"]["step"].tolist() == [10, 20, 30]
    assert curves["train"]["nll"].tolist() == [5.0, 3.9, 3.5]
    assert curves["dev"]["step"].tolist() == [20, 30] and curves["dev"]["bleu"].tolist() == [1.0, 2.5]


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory) -> Path:
    """A tiny run trained to step 10, then resumed to step 20, with TensorBoard on and a 20-sentence dev set."""
    out = tmp_path_factory.mktemp("resumed-run")
    for side in ("de", "en"):
        head = (DATA / f"dev.{side}").read_text(encoding="utf-8").splitlines()[:20]
        (out.parent / f"dev20.{side}").write_text("".join(line + "\n" for line in head), encoding="utf-8")
    settings = {"train.log_every": 5, "train.eval_every": 10, "train.save_every": 10, "train.tensorboard": "true",
                "data.dev_src": out.parent / "dev20.de", "data.dev_tgt": out.parent / "dev20.en"}
    run_mt("train", TINY, *tiny_overrides(out, **settings, **{"train.max_steps": 10}))
    run_mt("train", TINY, *tiny_overrides(out, **settings, **{"train.max_steps": 20}))
    return out


def test_curves_read_every_row_of_a_resumed_run_once(resumed_run):
    curves = metric_curves(resumed_run)
    train, dev = read_metrics(resumed_run, "train"), read_metrics(resumed_run, "dev")
    assert curves["train"]["step"].tolist() == [r["step"] for r in train] == [5, 10, 15, 20]
    assert curves["train"]["loss"].tolist() == [r["loss"] for r in train]
    assert curves["train"]["lr"].tolist() == [r["lr"] for r in train]
    assert curves["dev"]["step"].tolist() == [10, 20] and curves["dev"]["bleu"].tolist() == [r["bleu"] for r in dev]


def test_tensorboard_holds_the_metrics_scalars(resumed_run):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(resumed_run / "tensorboard"))
    events.Reload()
    train = read_metrics(resumed_run, "train")
    assert [(e.step, round(e.value, 4)) for e in events.Scalars("train/loss")] == [(r["step"], r["loss"]) for r in train]
    assert [e.step for e in events.Scalars("dev/bleu")] == [10, 20]
    assert {"train/lr", "train/nll", "dev/loss"} <= set(events.Tags()["scalars"])


# ---- the command: images of the stated size, one-line errors ----

def test_plot_commands_write_images_of_the_stated_size_without_a_display(tmp_path, random_checkpoint):
    no_display = {"DISPLAY": "", "WAYLAND_DISPLAY": "", "MPLBACKEND": ""}
    for args, size in [(["positions", "--positions", "50", "--dims", "64"], (1000, 600)),
                       (["attention", "-c", random_checkpoint, "--text", "Ein Texteditor."], (1500, 550))]:
        image = tmp_path / f"{args[0]}.png"
        proc = run_mt("plot", *args, "-o", image, env=no_display)
        assert png_size(image) == size, args
        assert proc.stderr.strip() == f"wrote {image}"


def test_each_picture_has_the_stated_size(tmp_path, resumed_run, random_checkpoint):
    sentence = (random_checkpoint, "Ein Texteditor.")
    cases = [(plot_mask, (8, 0), {}, (600, 600)),
             (plot_mask, (20, 3), {"dpi": 50}, (600, 300)),
             (plot_curves, ([resumed_run, resumed_run],), {}, (1500, 450)),
             (plot_attention, (*sentence, "A text editor.", 0, 3, False), {}, (1500, 550)),
             (plot_attention, (*sentence, None, None, None, True), {}, (1400, 1050))]
    for i, (draw, args, options, size) in enumerate(cases):
        image = tmp_path / f"{i}.png"
        draw(*args, output=image, show=False, **{"dpi": 100, **options})
        assert png_size(image) == size, (draw.__name__, args)
    svg = tmp_path / "mask.svg"
    plot_mask(5, 2, output=svg, show=False, dpi=100)
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()


def _fails_with(args, message: str, **kwargs):
    proc = run_mt("plot", *args, check=False, **kwargs)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"error: {message}"], proc.stderr


def test_plot_errors_are_one_line_from_the_command(tmp_path, random_checkpoint):
    out = ["-o", tmp_path / "x.png"]
    _fails_with(["attention", "-c", tmp_path / "none.pt", "--text", "a", *out], f"{tmp_path / 'none.pt'}: no such file")
    _fails_with(["curves", tmp_path, *out], f"{tmp_path}: no metrics.jsonl (not a training output_dir, or training "
                                            "has not logged yet)")
    _fails_with(["attention", "-c", random_checkpoint, "--text", "Ein Texteditor.", "--layer", "2", *out],
                "--layer 2: the model has 2 layers (0 to 1)")
    assert not (tmp_path / "x.png").exists()


def _raises(message: str, draw, *args, **kwargs):
    with pytest.raises(MtError) as error:
        draw(*args, **kwargs)
    assert str(error.value) == message


def test_plot_errors(tmp_path, random_checkpoint):
    to_file = {"output": tmp_path / "x.png", "show": False, "dpi": 100}
    attention = (random_checkpoint, "Ein Texteditor.")
    _raises("--head 4: the model has 4 heads (0 to 3)", plot_attention, *attention, None, None, 4, False, **to_file)
    _raises("--layer -1: the model has 2 layers (0 to 1)", plot_attention, *attention, None, -1, None, False, **to_file)
    _raises("give --head H or --all-heads, not both", plot_attention, *attention, None, None, 1, True, **to_file)
    long_text = " ".join(["Texteditor"] * 30)
    n = len(load_translator(random_checkpoint, "cpu").src_tokenizer.encode([long_text])[0])
    _raises(f"--text has {n} tokens plus EOS, more than the model's 24 positions",
            plot_attention, random_checkpoint, long_text, None, None, None, False, **to_file)
    _raises(f"--target has {n} tokens plus BOS, more than the model's 24 positions",
            plot_attention, *attention, long_text, None, None, False, **to_file)
    _raises("--text is empty", plot_attention, random_checkpoint, " ", None, None, None, False, **to_file)
    (tmp_path / "empty-run").mkdir()
    (tmp_path / "empty-run" / "metrics.jsonl").write_text("")
    _raises(f"{tmp_path / 'empty-run' / 'metrics.jsonl'}: no metrics yet", plot_curves, [tmp_path / "empty-run"],
            **to_file)
    _raises(f"{tmp_path / 'nowhere'}: no such folder", plot_curves, [tmp_path / "nowhere"], **to_file)
    _raises("mask needs size >= 1 and 0 <= padding < size, got size 4 and padding 4", plot_mask, 4, 4, **to_file)
    _raises("positions need n_positions >= 1 and an even d_model >= 2, got 10 and 7", plot_positions, 10, 7, **to_file)
    _raises(f"{tmp_path / 'x.jpg'}: the file name must end in .png or .svg", plot_positions, 10, 8,
            output=tmp_path / "x.jpg", show=False, dpi=100)
    _raises("give -o FILE (.png or .svg), or --show", plot_positions, 10, 8, output=None, show=False, dpi=100)
    assert not list(tmp_path.glob("x.*"))


def test_show_without_a_display_is_an_error(tmp_path):
    _fails_with(["positions", "--show"], "--show needs a display; write a file with -o FILE instead",
                env={"DISPLAY": "", "WAYLAND_DISPLAY": "", "MPLBACKEND": ""})


def test_missing_extras_are_one_line_errors(tmp_path, monkeypatch):
    """Without matplotlib (or tensorboard) the command names the extra to install."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['matplotlib'] = None\n")
    _fails_with(["positions", "-o", tmp_path / "p.png"], "mt plot needs matplotlib: pip install 'mt[plot]'",
                env={"PYTHONPATH": str(blocker)})
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if tensorboard were not installed
    with pytest.raises(MtError, match=r"^train.tensorboard needs tensorboard: pip install 'mt\[plot\]'$"):
        TensorBoardLog(tmp_path / "tensorboard")
