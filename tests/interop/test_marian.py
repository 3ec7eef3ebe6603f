"""`mt import` of Hugging Face Marian (OPUS-MT) models, proved against Hugging Face and CTranslate2.

Small MarianMTModels with random weights are built here with `transformers` (nothing is downloaded), with
sentencepiece models trained on the shipped corpus, and saved as `save_pretrained` saves them; mt imports the
directory and must give Hugging Face's log-probabilities, Hugging Face's greedy outputs and CTranslate2's beam
outputs (CTranslate2's own converter on the same directory)."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import MarianTokenizer

from mt.decoding.model_backend import load_model_translator
from mt.data.batching import pad_sequences
from mt.checkpoint import load_checkpoint
from mt.config import config_from_dict
from mt.interop.marian import import_marian
from mt.masks import padding_mask
from mt.symbols import BOS, EOS
from tests.conftest import DATA, TINY, read_metrics, run_mt, tiny_overrides
from tests.marian_models import LINES, make_marian

TARGETS = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:40]
MAX_LEN = 30


VARIANTS = [("swish", "shared"), ("relu", "shared"), ("swish", "separate"), ("relu", "separate")]


@pytest.fixture(scope="module", params=VARIANTS, ids=["-".join(v) for v in VARIANTS])
def marian(request, spm_models, tmp_path_factory):
    """(Hugging Face directory, its model, its tokenizer, the imported checkpoint)."""
    activation, spms = request.param
    folder = tmp_path_factory.mktemp(f"marian-{activation}-{spms}")
    source, target = (spm_models["both"],) * 2 if spms == "shared" else (spm_models["de"], spm_models["en"])
    model = make_marian(folder / "hf", source, target, activation)
    import_marian(folder / "hf", folder / "model.pt", log=lambda line: None)
    return folder / "hf", model, MarianTokenizer.from_pretrained(folder / "hf"), folder / "model.pt"


def _mt_model(checkpoint):
    tr = load_model_translator(checkpoint, "cpu")
    return tr.backend.model, tr.src_tokenizer, tr.tgt_tokenizer


def test_log_probs_equal_hugging_face_forward_pass(marian):
    assert_log_probs_equal_hugging_face(*marian)


def test_an_encoder_and_a_decoder_of_different_depths_import(spm_models, tmp_path):
    hf_model = make_marian(tmp_path / "hf", spm_models["both"], spm_models["both"], "swish", encoder_layers=3,
                           decoder_layers=1)
    import_marian(tmp_path / "hf", tmp_path / "model.pt", log=lambda line: None)
    model = config_from_dict(load_checkpoint(tmp_path / "model.pt")["config"]).model
    assert (model.encoder_layers, model.decoder_layers) == (3, 1)
    assert_log_probs_equal_hugging_face(tmp_path / "hf", hf_model, MarianTokenizer.from_pretrained(tmp_path / "hf"),
                                        tmp_path / "model.pt")


def assert_log_probs_equal_hugging_face(folder, hf_model, hf_tok, checkpoint):
    model, src_tok, tgt_tok = _mt_model(checkpoint)
    batch = hf_tok(LINES, text_target=TARGETS, return_tensors="pt", padding=True)
    src_ids = [s + [EOS] for s in src_tok.encode(LINES)]
    tgt_ids = tgt_tok.encode(TARGETS)
    # The same pieces: mt's renumbered sentencepiece models cut text as Hugging Face's tokenizer does.
    for ours, theirs in zip(src_ids, batch["input_ids"].tolist()):
        assert [src_tok.sp.id_to_piece(i) for i in ours] == hf_tok.convert_ids_to_tokens(theirs)[:len(ours)]
    labels = batch["labels"].masked_fill(batch["labels"] == hf_tok.pad_token_id, -100)
    with torch.no_grad():
        theirs = hf_model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).logits
        src = pad_sequences([torch.tensor(s) for s in src_ids])
        tgt_in = pad_sequences([torch.tensor([BOS, *t]) for t in tgt_ids])
        tgt_out = pad_sequences([torch.tensor([*t, EOS]) for t in tgt_ids])
        ours = model(src, padding_mask(src), tgt_in)
    real = labels != -100
    assert torch.equal(real, tgt_out != 0)
    theirs_lp = theirs.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0][real]
    ours_lp = ours.log_softmax(-1).gather(-1, tgt_out[..., None])[..., 0][real]
    diff = (theirs_lp - ours_lp).abs().max().item()
    print(f"{folder.parent.name}: {real.sum().item()} target tokens, max log-prob difference {diff:.2e}")
    assert diff < 1e-5


def _hf_ids_as_text(hf_ids: list[int], hf_tok, tgt_tok) -> str:
    """Hugging Face's output ids, read back through mt's target tokenizer (piece by piece)."""
    pieces = [p for p in hf_tok.convert_ids_to_tokens(hf_ids) if p not in ("<pad>", "</s>")]
    return tgt_tok.decode([tgt_tok.sp.piece_to_id(p) for p in pieces])


def test_greedy_equals_hugging_face_generate(marian):
    folder, hf_model, hf_tok, checkpoint = marian
    _, _, tgt_tok = _mt_model(checkpoint)
    batch = hf_tok(LINES, return_tensors="pt", padding=True)
    with torch.no_grad():  # bad_words_ids: as OPUS-MT's configs say, PAD is never generated
        out = hf_model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=MAX_LEN + 1,
                                bad_words_ids=[[hf_tok.pad_token_id]])
    theirs = [_hf_ids_as_text(row[1:], hf_tok, tgt_tok) for row in out.tolist()]
    ours = run_mt("translate", "-c", checkpoint, "--beam-size", "1", "--max-len-a", "0", "--max-len-b", MAX_LEN,
                  "--device", "cpu", input="\n".join(LINES) + "\n").stdout.splitlines()
    same = sum(a == b for a, b in zip(ours, theirs))
    print(f"{folder.parent.name}: greedy identical to Hugging Face's generate on {same} of {len(LINES)} lines")
    assert ours == theirs


def test_beam_equals_ctranslate2_own_converter(marian, tmp_path):
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    folder, hf_model, hf_tok, checkpoint = marian
    _, src_tok, tgt_tok = _mt_model(checkpoint)
    TransformersConverter(str(folder)).convert(str(tmp_path / "ct2"))
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), device="cpu")
    sources = [hf_tok.convert_ids_to_tokens(ids) for ids in hf_tok(LINES)["input_ids"]]
    # min_decoding_length 0: mt's search may end at the first step (CTranslate2's default forbids it).
    results = translator.translate_batch(sources, beam_size=4, length_penalty=0.0, min_decoding_length=0,
                                         max_decoding_length=MAX_LEN + 1, return_scores=True, return_end_token=True)
    theirs = [(tgt_tok.decode([tgt_tok.sp.piece_to_id(p) for p in r.hypotheses[0]]), r.scores[0],
               r.hypotheses[0][-1:] == ["</s>"]) for r in results]
    rows = run_mt("translate", "-c", checkpoint, "--beam-size", "4", "--alpha", "0", "--max-len-a", "0",
                  "--max-len-b", MAX_LEN, "--scores", "--device", "cpu",
                  input="\n".join(LINES) + "\n").stdout.splitlines()
    ours = [(text, float(score)) for score, text in (row.split("\t", 1) for row in rows)]
    # A search that reaches the length limit ends differently in each (mt adds EOS there, CTranslate2 stops
    # one piece later): the other lines are compared.
    ended = [(a, b) for a, b in zip(ours, theirs) if b[2]]
    same = sum(a[0] == b[0] for a, b in ended)
    diff = max(abs(a[1] - b[1]) for a, b in ended)
    print(f"{folder.parent.name}: beam 4 identical to CTranslate2's own conversion on {same} of {len(ended)} lines "
          f"that end before {MAX_LEN} pieces ({len(LINES) - len(ended)} reach it); largest score difference {diff:.1e}")
    assert same == len(ended) >= 0.7 * len(LINES) and diff < 1e-4


def test_mt_export_equals_ctranslate2_own_converter(marian, tmp_path):
    """The same pieces and scores, capped lines too, from `mt export` of the imported checkpoint as from
    CTranslate2's converter of the Hugging Face directory."""
    import ctranslate2
    from ctranslate2.converters import TransformersConverter

    folder, _, hf_tok, checkpoint = marian
    run_mt("export", "-c", checkpoint, "-o", tmp_path / "exported")
    TransformersConverter(str(folder)).convert(str(tmp_path / "ct2"))
    sources = [hf_tok.convert_ids_to_tokens(ids) for ids in hf_tok(LINES)["input_ids"]]
    found = []
    for directory in (tmp_path / "exported", tmp_path / "ct2"):
        translator = ctranslate2.Translator(str(directory), device="cpu")
        # mt's export appends EOS itself (add_source_eos), CTranslate2's Marian conversion takes it in the input.
        given = [s[:-1] for s in sources] if directory.name == "exported" else sources
        found.append(translator.translate_batch(given, beam_size=4, length_penalty=0.0, min_decoding_length=0,
                                                max_decoding_length=MAX_LEN, return_scores=True))
    ours, theirs = found
    assert [r.hypotheses for r in ours] == [r.hypotheses for r in theirs]
    assert max(abs(a.scores[0] - b.scores[0]) for a, b in zip(ours, theirs)) < 1e-4


def test_mt_serve_translates_an_imported_model_as_mt_translate_does(marian):
    """The imported checkpoint behind a real `mt serve`: its native endpoint gives `mt translate`'s lines."""
    from tests.conftest import RunningServer

    _, _, _, checkpoint = marian
    lines = LINES[:8]
    offline = run_mt("translate", "-c", checkpoint, "--device", "cpu",
                     input="\n".join(lines) + "\n").stdout.splitlines()
    server = RunningServer(checkpoint, "--device", "cpu")
    try:
        answer = server.post("/mt/translate", json={"source": "de", "target": "en", "lines": lines})
        assert answer.status_code == 200, answer.text
        assert [r["hypotheses"][0]["text"] for r in answer.json()["results"]] == offline
    finally:
        assert server.stop() == 0


def test_import_command_prints_the_sections_a_fine_tuning_config_needs(spm_models, tmp_path):
    make_marian(tmp_path / "hf", spm_models["both"], spm_models["both"], "swish")
    proc = run_mt("import", tmp_path / "hf", "-o", tmp_path / "model.pt")
    printed = __import__("yaml").safe_load(proc.stdout)
    assert printed["model"]["activation"] == "swish" and printed["model"]["decoder_start"] == "pad"
    assert printed["tokenizer"]["vocab_file"] == "vocab.json"
    cfg = config_from_dict(load_checkpoint(tmp_path / "model.pt")["config"])
    assert cfg.model.positions == "concatenated" and cfg.model.output_bias


@pytest.mark.parametrize("field,value,message", [
    ("activation_function", "gelu", "activation_function 'gelu': mt has relu, swish, silu"),
    ("decoder_ffn_dim", 128, "decoder_ffn_dim 128: mt needs it equal to encoder_ffn_dim (64)"),
    ("scale_embedding", False, "scale_embedding False: mt's model has True"),
    ("model_type", "bart", "model_type 'bart': mt imports Marian models (model_type 'marian') only"),
])
def test_what_mt_cannot_represent_is_one_line_naming_the_field(spm_models, tmp_path, field, value, message):
    make_marian(tmp_path / "hf", spm_models["both"], spm_models["both"], "swish")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    (tmp_path / "hf" / "config.json").write_text(json.dumps({**config, field: value}))
    proc = run_mt("import", tmp_path / "hf", "-o", tmp_path / "model.pt", check=False)
    assert proc.returncode == 1 and proc.stderr == f"error: {tmp_path / 'hf' / 'config.json'}: {message}\n"
    assert not (tmp_path / "model.pt").exists()


@pytest.mark.slow
def test_an_imported_model_fine_tunes_on_the_shipped_corpus_and_resumes_exactly(spm_models, tmp_path):
    """train.init_from an imported model: the dev loss falls; a run stopped halfway and resumed ends with the
    weights of one that ran through."""
    make_marian(tmp_path / "hf", spm_models["both"], spm_models["both"], "swish")
    printed = run_mt("import", tmp_path / "hf", "-o", tmp_path / "model.pt").stdout
    sections = __import__("yaml").safe_load(printed)
    model_keys = [f"model.{k}={json.dumps(v)}" for k, v in sections["model"].items()]
    tok_keys = [f"tokenizer.{k}={json.dumps(v)}" for k, v in sections["tokenizer"].items()]

    def train(out, steps, *extra):
        sets = [*model_keys, *tok_keys, f"train.init_from={tmp_path / 'model.pt'}", f"train.max_steps={steps}",
                "train.eval_every=20", "train.save_every=10", "train.warmup_steps=10", "train.lr_scale=0.5",
                "train.best_metric=loss", *extra]
        return run_mt("train", TINY, *tiny_overrides(out), *[a for s in sets for a in ("--set", s)])

    train(tmp_path / "through", 40)
    train(tmp_path / "resumed", 20)
    train(tmp_path / "resumed", 40)
    dev = [r["loss"] for r in read_metrics(tmp_path / "through", "dev")]
    print(f"fine-tuning an imported model: dev loss {dev[0]} after 20 updates, {dev[-1]} after 40")
    assert dev[-1] < dev[0]
    a, b = (load_checkpoint(tmp_path / run / "checkpoint_last.pt")["model"] for run in ("through", "resumed"))
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_multi_target_model_imports_a_direction_per_language_piece_decoded_as_transformers(spm_models, tmp_path):
    hf_model = make_marian(tmp_path / "hf", spm_models["both"], spm_models["both"], "swish",
                           tags=(">>fra<<", ">>spa<<", ">>ROMANCE<<"), source_lang="de")
    with torch.no_grad():  # a few pieces before the end, as few_words_model: outputs that can differ
        hf_model.final_logits_bias[0, 0] -= 1.5
    hf_model.save_pretrained(tmp_path / "hf")
    lines = []
    run_mt("import", tmp_path / "hf", "-o", tmp_path / "model.pt")
    assert "directions: de:fra, de:spa; a >>xx<< token" in run_mt("info", tmp_path / "model.pt").stdout
    hf_tok = MarianTokenizer.from_pretrained(tmp_path / "hf")
    _, _, tgt_tok = _mt_model(tmp_path / "model.pt")
    for code in ("fra", "spa"):
        batch = hf_tok([f">>{code}<< {line}" for line in LINES], return_tensors="pt", padding=True)
        with torch.no_grad():
            out = hf_model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=MAX_LEN + 1,
                                    bad_words_ids=[[hf_tok.pad_token_id]])
        theirs = [_hf_ids_as_text(row[1:], hf_tok, tgt_tok) for row in out.tolist()]
        ours = run_mt("translate", "-c", tmp_path / "model.pt", "--target-lang", code, "--beam-size", "1",
                      "--max-len-a", "0", "--max-len-b", MAX_LEN, input="\n".join(LINES) + "\n").stdout.splitlines()
        assert ours == theirs
        lines.append(ours)
    assert lines[0] != lines[1]  # the piece changes the translation
    refused = run_mt("translate", "-c", tmp_path / "model.pt", input="Hallo.\n", check=False)
    assert refused.returncode != 0 and "de:fra, de:spa" in refused.stderr
