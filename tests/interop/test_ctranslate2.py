"""`mt export --format ctranslate2` and `mt translate -c DIR`: the exported model decodes as mt does."""

import os
import shutil
import subprocess
import sys
from dataclasses import replace

import ctranslate2  # noqa: F401 (the ct2 extra: every test here needs it)
import pytest
import torch

from mt.checkpoint import load_checkpoint, save_checkpoint
from mt.config import DecodeConfig, config_from_dict, config_to_dict
from mt.decoding.ct2_backend import files_in_int8_limit
from mt.decoding.ct2_model_bin import in_int8_limit, is_weight, model_bin_bytes, parse_model_bin
from mt.decoding.text_front_end import translate_lines
from mt.errors import MtError
from mt.model.transformer import build_model
from mt.data.tokenizer import Tokenizer
from mt.decoding.loading import load_translator
from tests.conftest import DATA, run_mt

LINES = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:200]
GREEDY = DecodeConfig(beam_size=1, alpha=0.6, max_len_a=1.0, max_len_b=10, batch_tokens=2048)


def _compare(checkpoint, exported, lines, options=GREEDY):
    """(share of identical lines, largest score difference per token among them) of mt and the export."""
    ours = load_translator(checkpoint, "cpu")
    theirs = load_translator(exported, "cpu")
    with torch.inference_mode():
        a = translate_lines(ours, lines, options)
    b = translate_lines(theirs, lines, options)
    same = [(x[0], y[0]) for x, y in zip(a, b) if x[0][0] == y[0][0]]
    lengths = [len(t) + 1 for t in ours.tgt_tokenizer.encode([x[0] for x, _ in same])]
    per_token = max((abs(x[1] - y[1]) / n for (x, y), n in zip(same, lengths)), default=0.0)
    return len(same) / len(lines), per_token


@pytest.fixture(scope="module")
def exported(trained_tiny, tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "ct2"
    run_mt("export", "-c", trained_tiny / "checkpoint_last.pt", "--format", "ctranslate2", "-o", out)
    return out


def test_export_writes_a_complete_directory(exported):
    names = {p.name for p in exported.iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json", "source.spm", "target.spm", "mt.yaml"} <= names
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")], "no temporary directory left"


def test_exported_greedy_equals_mt(trained_tiny, exported):
    same, per_token = _compare(trained_tiny / "checkpoint_last.pt", exported, LINES)
    print(f"identical lines {same:.1%}, score difference per token {per_token:.2g}")
    # Measured: 200 of 200 lines, 5.5e-7 per token. This 60-update model writes runs of one piece up to the length
    # limit, so its scores are the sharper witness; the random models below write varied lines.
    assert same == 1.0 and per_token < 1e-4


def _random_checkpoint(trained_tiny, path, **model_changes):
    """The tiny run's checkpoint with another architecture and random weights."""
    ckpt = load_checkpoint(trained_tiny / "checkpoint_last.pt")
    cfg = config_from_dict(ckpt["config"])
    cfg = replace(cfg, model=replace(cfg.model, **model_changes))
    vocab = len(Tokenizer.from_tensor(ckpt["src_tokenizer"]))
    torch.manual_seed(0)
    model = build_model(cfg.model, vocab, vocab, cfg.tokenizer.joint)
    save_checkpoint(path, {**{k: ckpt[k] for k in ("src_tokenizer", "tgt_tokenizer", "step")},
                           "config": config_to_dict(cfg), "model": model.state_dict()})
    return path


@pytest.mark.parametrize("changes", [dict(norm="pre"), dict(share_embeddings=False)])
def test_pre_norm_and_untied_output_export_too(trained_tiny, tmp_path, changes):
    checkpoint = _random_checkpoint(trained_tiny, tmp_path / "random.pt", **changes)
    run_mt("export", "-c", checkpoint, "-o", tmp_path / "ct2")
    same, per_token = _compare(checkpoint, tmp_path / "ct2", LINES[:50], replace(GREEDY, max_len_b=5))
    assert same == 1.0 and per_token < 1e-4  # measured: 50 of 50 lines; pre-LN 1.1e-5, untied 4.1e-7


def test_translate_with_an_exported_directory_takes_the_same_options(exported, tmp_path):
    lines = ["Ein Texteditor.", "", "Dieses Paket enthält die Dokumentation."]
    plain = run_mt("translate", "-c", exported, "--beam-size", "1", "--device", "cpu",
                   input="\n".join(lines) + "\n").stdout.split("\n")
    assert len(plain) == 4 and plain[1] == ""
    nbest = run_mt("translate", "-c", exported, "--nbest", "2", "--beam-size", "4", "--max-len-a", "0",
                   "--max-len-b", "3", "--batch-tokens", "64", input="\n".join(lines) + "\n").stdout
    rows = [line.split("\t") for line in nbest.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "1", "1", "2", "2"]
    assert all(len(r[2].split()) <= 3 for r in rows)


def _scored(directory, *options) -> list[tuple[float, str]]:
    out = run_mt("translate", "-c", directory, "--scores", *options, input="".join(f"{x}\n" for x in LINES[:10]))
    return [(float(score), text) for score, text in (line.split("\t") for line in out.stdout.splitlines())]


@pytest.mark.int8
def test_int8_moves_every_score_a_little(trained_tiny, exported, tmp_path):
    """`--quantize int8` (CTranslate2's int8 compute type) and an export with `--quantization int8` (int8 weights
    in model.bin) each change every score, and not far: on the first 40 dev lines both gave float32's text on
    every line (this model's runs of one piece), scores 0.0043 to 0.0085 apart (printed to 4 decimals); the int8
    model.bin was 0.34 of float32's size."""
    run_mt("export", "-c", trained_tiny / "checkpoint_last.pt", "--quantization", "int8", "-o", tmp_path / "int8")
    assert (tmp_path / "int8" / "model.bin").stat().st_size < 0.4 * (exported / "model.bin").stat().st_size
    floats = _scored(exported)
    for int8s in (_scored(exported, "--quantize", "int8"), _scored(tmp_path / "int8")):
        same = [(f, q) for (f, f_text), (q, q_text) in zip(floats, int8s) if f_text == q_text]
        assert len(int8s) == 10 and len(same) >= 9 and all(1e-4 <= abs(f - q) < 0.05 for f, q in same)


def _weight_magnitudes(model_bin: bytes) -> dict[str, int]:
    """The largest |value| of each int8 weight matrix in a model.bin."""
    variables = parse_model_bin(model_bin).variables
    return {name: int(abs(values.astype(int)).max()) for name, (values, dtype) in variables.items()
            if dtype == "int8" and is_weight(name, values)}


@pytest.mark.int8
def test_int8_weights_are_written_and_loaded_in_7_bits(trained_tiny, exported, tmp_path):
    """An int8 export holds every weight matrix in -63..63 (each row's largest at 63), so no CPU's 8-bit products
    saturate (mt/decoding/ct2_model_bin.py); a float export asked for int8, and an int8 model.bin in 8 bits, are
    given to CTranslate2 in 7 bits; a 7-bit or float32 model.bin is loaded as it is."""
    run_mt("export", "-c", trained_tiny / "checkpoint_last.pt", "--quantization", "int8", "-o", tmp_path / "int8")
    written = _weight_magnitudes((tmp_path / "int8" / "model.bin").read_bytes())
    assert len(written) >= 10 and set(written.values()) == {63}
    assert files_in_int8_limit(tmp_path / "int8", "default") is None
    assert files_in_int8_limit(exported, "default") is None
    loaded = files_in_int8_limit(exported, "int8")
    assert _weight_magnitudes(loaded["model.bin"]) == written and "config.json" in loaded
    eight_bits = tmp_path / "eight-bits"  # as CTranslate2's own converter quantizes: 127 at each row's largest
    shutil.copytree(exported, eight_bits)
    float_model = parse_model_bin((exported / "model.bin").read_bytes())
    (eight_bits / "model.bin").write_bytes(model_bin_bytes(in_int8_limit(float_model, 127)))
    assert set(_weight_magnitudes((eight_bits / "model.bin").read_bytes()).values()) == {127}
    assert set(_weight_magnitudes(files_in_int8_limit(eight_bits, "default")["model.bin"]).values()) == {63}


def test_a_model_bin_is_written_back_byte_for_byte(exported):
    """mt's writer lays out model.bin as CTranslate2's own writer does: the export's (CTranslate2's spec.save, with
    int8 flags and the tied embedding saved once under an alias) parsed and written again is the same bytes."""
    data = (exported / "model.bin").read_bytes()
    assert parse_model_bin(data).aliases and model_bin_bytes(parse_model_bin(data)) == data


def test_export_refuses_an_existing_directory_unless_forced(trained_tiny, tmp_path):
    (tmp_path / "ct2").mkdir()
    proc = run_mt("export", "-c", trained_tiny / "checkpoint_last.pt", "-o", tmp_path / "ct2", check=False)
    assert proc.returncode == 1 and proc.stderr.strip() == f"error: {tmp_path / 'ct2'} exists; remove it or pass --force"
    run_mt("export", "-c", trained_tiny / "checkpoint_last.pt", "-o", tmp_path / "ct2", "--force",
           "--quantization", "int8")
    assert (tmp_path / "ct2" / "model.bin").is_file()


def test_without_ctranslate2_the_error_names_the_extra(trained_tiny, tmp_path, monkeypatch):
    from mt.interop.ctranslate2 import export_ctranslate2

    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 now raises ImportError
    with pytest.raises(MtError, match=r"pip install 'mt\[ct2\]'"):
        export_ctranslate2(trained_tiny / "checkpoint_last.pt", tmp_path / "ct2")
    assert not (tmp_path / "ct2").exists()


def test_an_exported_directory_starts_each_output_with_its_prefix(exported):
    out = run_mt("translate", "-c", exported, "--prefix", "--beam-size", "2",
                 input="Es zeigt Dateien an.\tThe files\nEin kleines Programm.\n").stdout.splitlines()
    plain = run_mt("translate", "-c", exported, "--beam-size", "2", input="Ein kleines Programm.\n").stdout
    assert out[0].startswith("The files") and out[1] == plain.strip()


def test_an_exported_directory_aligns_as_mt_does(trained_tiny, exported):
    lines = "".join(line + "\n" for line in LINES[:40])
    ours = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--alignment", "--beam-size", "1",
                  input=lines).stdout.splitlines()
    theirs = run_mt("translate", "-c", exported, "--alignment", "--beam-size", "1", input=lines).stdout.splitlines()
    assert len(ours) == 40 and ours == theirs  # measured on the first 200 dev lines: every text and alignment


def test_an_exported_directory_samples_with_ctranslate2(exported):
    text = "Ein kleines Programm.\nEs zeigt Dateien an.\n"
    args = ["translate", "-c", exported, "--sampling", "--nbest", "3", "--seed", "4"]
    out = run_mt(*args, input=text).stdout
    assert len(out.splitlines()) == 6 and run_mt(*args, input=text).stdout == out  # same seed, same batch
    greedy = run_mt("translate", "-c", exported, "--beam-size", "1", input=text).stdout.splitlines()
    top1 = run_mt(*args, "--topk", "1", input=text).stdout.splitlines()
    assert [row.split("\t")[2] for row in top1] == [g for g in greedy for _ in range(3)]


def _ctranslate2_without_cuda_libraries(monkeypatch):
    """A machine where CTranslate2 sees a GPU but lacks the CUDA 12 libraries its wheels need (seen on an H100
    with CUDA 13): the translator builds, and the first translation on CUDA raises."""
    import ctranslate2

    real = ctranslate2.Translator

    class NoCublas:
        def translate_batch(self, *args, **kwargs):
            raise RuntimeError("Library libcublas.so.12 is not found or cannot be loaded")

    monkeypatch.setattr(ctranslate2, "get_cuda_device_count", lambda: 1)
    monkeypatch.setattr(ctranslate2, "Translator",
                        lambda path, device, **kw: NoCublas() if device == "cuda" else real(path, device, **kw))


def test_auto_decodes_on_the_cpu_where_ctranslate2_cannot_use_the_gpu(exported, monkeypatch, capsys):
    expected = translate_lines(load_translator(exported, "cpu"), LINES[:5], GREEDY)
    _ctranslate2_without_cuda_libraries(monkeypatch)
    assert translate_lines(load_translator(exported, "auto"), LINES[:5], GREEDY) == expected
    assert "libcublas.so.12" in capsys.readouterr().err
    with pytest.raises(MtError, match="CTranslate2 cannot decode on CUDA here .*libcublas.so.12"):
        load_translator(exported, "cuda")


@pytest.mark.parametrize("user_value, loaded_with", [(None, "0"), ("1", "1")])
def test_ctranslate2_loads_with_onednn_unless_the_user_chose(user_value, loaded_with):
    """CT2_USE_MKL is read when the library loads: mt sets 0 (oneDNN) before importing it, and leaves a value the
    user set alone."""
    env = {k: v for k, v in os.environ.items() if k != "CT2_USE_MKL"}
    if user_value is not None:
        env["CT2_USE_MKL"] = user_value
    code = ("import os, sys; from mt.decoding.ct2_backend import import_ctranslate2; import_ctranslate2(); "
            "print(os.environ['CT2_USE_MKL'], 'ctranslate2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [loaded_with, "True"]


def test_a_short_call_alone_decodes_on_every_thread_a_long_one_on_its_share(exported, monkeypatch):
    """With two calls at once, a short call that starts with none decoding takes the copy on every thread and
    holds both slots while it runs; a long one, or one beside another call, takes a share's translator."""
    import threading

    from mt.decoding.ct2_backend import ALONE_TOKENS
    from mt.decoding.lines import LineBatch, LineText, encode_lines
    from mt.decoding.protocol import Work

    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    translator = load_translator(exported, "cpu", ct2_parallel=2)
    backend = translator.backend
    assert backend.translator.num_translators == 2 and backend.alone.translator.num_translators == 1
    engine = backend.engine()
    used, release = [], threading.Event()
    for name, held in (("alone", backend.alone), ("share", backend)):
        def spy(requests, search=held.search, name=name):
            used.append(name)
            release.wait(60)
            return search(requests)
        monkeypatch.setattr(held, "search", spy)

    def work(lines):
        return Work(LineBatch(encode_lines(translator, [LineText(t, i) for i, t in enumerate(lines)]),
                              GREEDY, 1, backend.max_positions).todo)

    short, long = work(LINES[:1]), work(LINES[:60])
    assert sum(len(r.source) + 1 for r in long.requests) > ALONE_TOKENS
    assert engine.share([len(short.requests[0].source) + 1]) == 1
    engine.add([short])
    assert engine.calls == 2 and engine.share([5]) == 0  # the call alone holds both slots
    release.set()
    engine.close()
    assert used == ["alone"]
    alone_tokens = [h.tokens for h in short.hypotheses[0]]
    engine, release = backend.engine(), threading.Event()
    engine.add([long])
    assert engine.calls == 1 and engine.share([5]) == 1  # beside a call on its share: a call of its own
    engine.add([short])
    release.set()
    engine.close()
    assert used == ["alone", "share", "share"]
    assert [h.tokens for h in short.hypotheses[0]] == alone_tokens and len(long.hypotheses) == 60


@pytest.mark.parametrize("beam_size,nbest", [(1, 1), (4, 2)])
def test_the_attention_kept_while_searching_is_the_forced_pass(exported, beam_size, nbest):
    """Asked for word alignment, an export keeps each hypothesis's cross-attention from its search (row 0 from a
    one-step call, for beam search): the same, to float rounding, as forcing every hypothesis afterwards."""
    from mt.decoding.lines import LineBatch, LineText, encode_lines

    tr = load_translator(exported, "cpu")
    lines = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:40]
    opts = replace(tr.cfg.decode, beam_size=beam_size)
    encoded = encode_lines(tr, [LineText(line, i) for i, line in enumerate(lines)])
    batch = LineBatch(encoded, opts, nbest, tr.backend.max_positions, attention=True)
    found = tr.backend.search(batch.todo)
    pairs = [(list(r.source), h) for r, per in zip(batch.todo, found) for h in per]
    assert len(pairs) == nbest * len(batch.todo) and all(h.attention is not None for _, h in pairs)
    forced = tr.backend.attention([source for source, _ in pairs], [h.tokens for _, h in pairs])
    for (_, h), weights in zip(pairs, forced):
        assert h.attention.shape == weights.shape
        assert torch.allclose(h.attention, weights, atol=1e-5)
    plain = LineBatch(encoded, opts, nbest, tr.backend.max_positions)  # the same search without the attention
    assert [[h.tokens for h in per] for per in tr.backend.search(plain.todo)] == [[h.tokens for h in per]
                                                                                 for per in found]
