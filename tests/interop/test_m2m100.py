"""`mt import` of a Hugging Face M2M100 model, proved against transformers.

A small M2M100ForConditionalGeneration with random weights is built here (nothing is downloaded), with a
sentencepiece model trained on the shipped corpus and the wmt21 language list, and saved as `save_pretrained`
saves one; mt imports the directory and must give transformers' forced log-probabilities and greedy outputs in
two directions, translate through its CTranslate2 export as it does itself, and fine-tune. The same model with
NLLB's tokenizer (NllbTokenizer, language codes such as deu_Latn) must give transformers' greedy outputs too."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest
import sentencepiece as spm
import torch
from transformers import M2M100Config, M2M100ForConditionalGeneration, M2M100Tokenizer, NllbTokenizer

from tests.conftest import DATA, one_error_line, run_mt

SOURCES = {"de": (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:20],
           "en": (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:20]}
GREEDY = ("--beam-size", "1", "--max-len-a", "0", "--max-len-b", "20")


def sentencepiece_model(folder: Path) -> spm.SentencePieceProcessor:
    """A BPE sentencepiece model of the shipped corpus' two sides, written as folder/sentencepiece.bpe.model."""
    lines = [line for side in ("de", "en") for line in (DATA / f"sample-2k.{side}").read_text("utf-8").splitlines()]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=400, model_type="bpe",
                                   character_coverage=1.0, num_threads=1, minloglevel=2)
    folder.mkdir(parents=True)
    (folder / "sentencepiece.bpe.model").write_bytes(model.getvalue())
    return spm.SentencePieceProcessor(model_proto=model.getvalue())


def make_m2m100(folder: Path) -> M2M100ForConditionalGeneration:
    """An M2M100 directory as transformers saves one: vocab.json of <s>, <pad>, </s>, <unk> and the pieces of a
    BPE sentencepiece model, the 8 languages of wmt21 after them; random weights whose outputs follow the source."""
    sp = sentencepiece_model(folder)
    pieces = ["<s>", "<pad>", "</s>", "<unk>"] + [sp.id_to_piece(i) for i in range(len(sp))
                                                  if not sp.is_control(i) and sp.id_to_piece(i) != "<unk>"]
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}), encoding="utf-8")
    M2M100Tokenizer(str(folder / "vocab.json"), str(folder / "sentencepiece.bpe.model"),
                    language_codes="wmt21").save_pretrained(folder)
    # 8 language tokens after vocab.json's pieces. Released models have made-up words after them, which their
    # tokenizer decodes as <unk> (`test_made_up_words_fill_the_vocabulary`); these random weights would write them.
    return random_m2m100(folder, len(pieces) + 8)


def random_m2m100(folder: Path, vocab_size: int) -> M2M100ForConditionalGeneration:
    """A small M2M100ForConditionalGeneration saved in `folder`, random weights whose outputs follow the source."""
    config = M2M100Config(vocab_size=vocab_size, d_model=32, encoder_layers=2, decoder_layers=2,
                          encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                          max_position_embeddings=256, dropout=0.0)
    torch.manual_seed(0)
    m2m = M2M100ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, p in m2m.named_parameters():
            if "layer_norm" in name:
                p.copy_((1.0 if name.endswith("weight") else 0.0) + 0.2 * torch.randn_like(p))
            else:
                p.normal_(0.0, 0.5 if "shared" in name else 0.2)
        m2m.model.shared.weight[1].zero_()
        m2m.model.decoder.layer_norm.weight.normal_(0.0, 1.0)  # not the input token again and again
        for layer in m2m.model.decoder.layers:
            layer.encoder_attn.out_proj.weight *= 4  # outputs that follow the source
    m2m.save_pretrained(folder)
    return m2m


NLLB_CODES = ["deu_Latn", "eng_Latn", "fra_Latn"]


def make_nllb(folder: Path) -> tuple[M2M100ForConditionalGeneration, NllbTokenizer]:
    """An NLLB directory as transformers saves one: NllbTokenizer (tokenizer.json: <s>, <pad>, </s>, <unk>, the
    sentencepiece model's pieces one place up, <mask>, three language codes) and an M2M100 model of its size."""
    sentencepiece_model(folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "NllbTokenizer"}), encoding="utf-8")
    tokenizer = NllbTokenizer.from_pretrained(folder, extra_special_tokens=NLLB_CODES)
    tokenizer.save_pretrained(folder)
    return random_m2m100(folder, len(tokenizer)), NllbTokenizer.from_pretrained(folder)


@pytest.fixture(scope="module")
def nllb(tmp_path_factory):
    """(the Hugging Face directory, its model, its tokenizer, the imported checkpoint, `mt import`'s output)."""
    folder = tmp_path_factory.mktemp("nllb")
    model, tokenizer = make_nllb(folder / "hf")
    imported = run_mt("import", folder / "hf", "-o", folder / "model.pt")
    return folder / "hf", model, tokenizer, folder / "model.pt", imported


@pytest.mark.parametrize("source, target", [("deu_Latn", "eng_Latn"), ("eng_Latn", "fra_Latn")])
def test_nllb_greedy_outputs_equal_transformers_generate(nllb, source, target):
    folder, model, tokenizer, checkpoint, _ = nllb
    tokenizer.src_lang = source
    lines = SOURCES[source[:2]]
    batch = tokenizer(lines, return_tensors="pt", padding=True)
    assert batch.input_ids[0, 0] == tokenizer.convert_tokens_to_ids(source)  # the source's own code first
    found = model.generate(**batch, forced_bos_token_id=tokenizer.convert_tokens_to_ids(target), num_beams=1,
                           do_sample=False, max_new_tokens=20)
    expected = tokenizer.batch_decode(found[:, 2:], skip_special_tokens=True)  # after </s> and the target's code
    assert len(set(expected)) > 5
    assert translate(checkpoint, lines, "--source-lang", source, "--target-lang", target, *GREEDY) == expected


def test_nllb_import_records_its_codes_as_the_language_tokens(nllb, tmp_path):
    folder, *_, checkpoint, imported = nllb
    assert "languages:\n  token: nllb" in imported.stdout
    assert "directions: deu_Latn:eng_Latn, deu_Latn:fra_Latn, eng_Latn:deu_Latn" in run_mt("info", checkpoint).stdout
    asked = run_mt("translate", "-c", checkpoint, "--source-lang", "de", "--target-lang", "eng_Latn", input="x\n",
                   check=False)
    assert "not de:eng_Latn" in one_error_line(asked)
    run_mt("export", "-c", checkpoint, "-o", tmp_path / "ct2")
    options = ("--source-lang", "deu_Latn", "--target-lang", "fra_Latn", *GREEDY)
    assert translate(tmp_path / "ct2", SOURCES["de"], *options) == translate(checkpoint, SOURCES["de"], *options)


def test_an_nllb_model_is_served_under_the_tags_libretranslates_clients_send(nllb):
    """`mt serve` lists deu_Latn as de (BCP 47, langcodes), translates either name as mt translate does, and
    detects the source among them."""
    from tests.conftest import RunningServer

    *_, checkpoint, _ = nllb
    running = RunningServer(checkpoint, spec=str(checkpoint))
    try:
        languages = {x["code"]: x["targets"] for x in running.get("/languages").json()}
        assert languages == {"de": ["en", "fr"], "en": ["de", "fr"], "fr": ["de", "en"]}
        line = SOURCES["de"][3]
        expected = translate(checkpoint, [line], "--source-lang", "deu_Latn", "--target-lang", "fra_Latn")
        for source, target in (("de", "fr"), ("deu_Latn", "fra_Latn"), ("auto", "fr")):
            answer = running.post("/translate", json={"q": line, "source": source, "target": target}).json()
            assert answer["translatedText"] == expected[0]
        refused = running.post("/translate", json={"q": line, "source": "de", "target": "es"})
        assert refused.status_code == 400 and "de-es is not available" in refused.json()["error"]
    finally:
        assert running.stop() == 0


def test_an_nllb_directory_without_its_tokenizer_or_codes_is_one_line(nllb, tmp_path):
    folder, *_ = nllb
    for change, message in (
            (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json: missing (an NLLB directory holds"),
            (lambda d: _edit_json(d / "tokenizer.json", added_tokens=[]), "no language code among its tokens")):
        broken = tmp_path / message[:8].replace(" ", "_").replace(":", "")
        shutil.copytree(folder, broken)
        change(broken)
        proc = run_mt("import", broken, "-o", broken / "model.pt", check=False)
        assert message in one_error_line(proc)
        assert not (broken / "model.pt").exists()


@pytest.fixture(scope="module")
def m2m100(tmp_path_factory):
    """(the Hugging Face directory, its model, its tokenizer, the imported checkpoint, `mt import`'s output)."""
    folder = tmp_path_factory.mktemp("m2m100")
    model = make_m2m100(folder / "hf")
    (folder / "hf" / "README.md").write_text("---\nlicense: cc-by-nc-4.0\n---\n", encoding="utf-8")
    imported = run_mt("import", folder / "hf", "-o", folder / "model.pt")
    return folder / "hf", model, M2M100Tokenizer.from_pretrained(folder / "hf"), folder / "model.pt", imported


def translate(model: Path, lines: list[str], *options: str) -> list[str]:
    return run_mt("translate", "-c", model, *options, input="".join(line + "\n" for line in lines)).stdout.splitlines()


@pytest.mark.parametrize("source, target", [("de", "en"), ("en", "de")])
def test_forced_log_probs_equal_transformers(m2m100, source, target, tmp_path):
    folder, model, tokenizer, checkpoint, _ = m2m100
    sources, targets = SOURCES[source][:10], SOURCES[target][:10]
    tokenizer.src_lang, tokenizer.tgt_lang = source, target
    expected = []
    for s, t in zip(sources, targets):
        batch = tokenizer(s, text_target=t, return_tensors="pt")
        labels = batch.pop("labels")  # __target__, the pieces, </s>; the decoder starts from </s>
        decoder_input = torch.cat([torch.tensor([[2]]), labels[:, :-1]], dim=1)
        with torch.no_grad():
            logits = model(**batch, decoder_input_ids=decoder_input).logits
        expected.append(logits.log_softmax(-1).gather(-1, labels[..., None]).sum().item())
    (tmp_path / "src").write_text("\n".join(sources) + "\n", encoding="utf-8")
    (tmp_path / "tgt").write_text("\n".join(targets) + "\n", encoding="utf-8")
    scored = run_mt("score", "-c", checkpoint, "--src", tmp_path / "src", "--tgt", tmp_path / "tgt", "--source-lang",
                    source, "--target-lang", target).stdout.split()
    assert [float(x) for x in scored] == pytest.approx(expected, abs=2e-4)


@pytest.mark.parametrize("source, target", [("de", "en"), ("en", "de")])
def test_greedy_outputs_equal_transformers_generate(m2m100, source, target):
    folder, model, tokenizer, checkpoint, _ = m2m100
    tokenizer.src_lang = source
    batch = tokenizer(SOURCES[source], return_tensors="pt", padding=True)
    found = model.generate(**batch, forced_bos_token_id=tokenizer.get_lang_id(target), num_beams=1,
                           do_sample=False, max_new_tokens=20)
    expected = tokenizer.batch_decode(found[:, 2:], skip_special_tokens=True)  # after </s> and __target__
    assert len(set(expected)) > 5  # outputs that follow their source
    assert translate(checkpoint, SOURCES[source], "--source-lang", source, "--target-lang", target, *GREEDY) == expected


def test_the_import_records_the_languages_and_warns_of_the_licence(m2m100):
    *_, checkpoint, imported = m2m100
    assert "warning:" in imported.stderr and "non-commercial licence (CC-BY-NC)" in imported.stderr
    assert "languages:\n  token: m2m100" in imported.stdout
    assert "directions: 56 directions between 8 languages (cs, de, en, ha, is, ja, ru, zh)" in \
        run_mt("info", checkpoint).stdout


def test_its_ctranslate2_export_translates_as_the_checkpoint(m2m100, tmp_path):
    *_, checkpoint, _ = m2m100
    run_mt("export", "-c", checkpoint, "-o", tmp_path / "ct2")
    options = ("--source-lang", "de", "--target-lang", "en", *GREEDY)
    assert translate(tmp_path / "ct2", SOURCES["de"], *options) == translate(checkpoint, SOURCES["de"], *options)
    hf = run_mt("export", "-c", checkpoint, "-o", tmp_path / "hf", "--format", "huggingface", check=False)
    assert "its Hugging Face form is the M2M100 directory it was imported from" in one_error_line(hf)


def test_the_source_language_is_required_and_checked(m2m100):
    *_, checkpoint, _ = m2m100
    for options, message in ((("--target-lang", "en"), "is told the source language; say which with --source-lang"),
                             (("--source-lang", "fr", "--target-lang", "en"), "not fr:en")):
        assert message in one_error_line(run_mt("translate", "-c", checkpoint, *options, input="x\n", check=False))


def test_fine_tuning_an_imported_model_on_one_direction(m2m100, tmp_path):
    *_, checkpoint, imported = m2m100
    sections = imported.stdout  # the tokenizer, model and languages sections `mt import` prints
    config = tmp_path / "finetune.yaml"
    corpus = f"{{src: {DATA / 'sample-2k.de'}, tgt: {DATA / 'sample-2k.en'}, src_lang: de, tgt_lang: en}}"
    config.write_text(sections + f"output_dir: {tmp_path / 'run'}\n" + f"data:\n  train:\n    - {corpus}\n"
                      f"train: {{init_from: {checkpoint}, max_steps: 4, batch_tokens: 1024, warmup_steps: 2, "
                      "save_every: 4, eval_every: 4}\n", encoding="utf-8")
    run_mt("train", config)
    tuned = tmp_path / "run" / "checkpoint_last.pt"
    assert "directions: de:en" in run_mt("info", tuned).stdout
    out = translate(tuned, SOURCES["de"][:3], "--source-lang", "de", "--target-lang", "en", *GREEDY)
    assert len(out) == 3 and out != translate(checkpoint, SOURCES["de"][:3], "--source-lang", "de", "--target-lang",
                                              "en", *GREEDY)
    refused = run_mt("train", config, "--set", "languages.token=none", "--set", f"output_dir={tmp_path / 'x'}",
                     check=False)
    assert "its model is told the languages by tokens (languages.token m2m100)" in one_error_line(refused)


def test_an_unknown_language_list_or_misplaced_special_piece_is_one_line(m2m100, tmp_path):
    folder, *_ = m2m100
    for change, message in (
            (lambda d: _edit_json(d / "tokenizer_config.json", language_codes="m2m200"),
             "language_codes 'm2m200': transformers knows m2m100, wmt21"),
            (lambda d: _edit_json(d / "vocab.json", **{"<pad>": 0, "<s>": 1}), "<s> is not id 0")):
        broken = tmp_path / message[:8].replace(" ", "_")
        shutil.copytree(folder, broken)
        change(broken)
        proc = run_mt("import", broken, "-o", broken / "model.pt", check=False)
        assert message in one_error_line(proc)
        assert not (broken / "model.pt").exists()


def _edit_json(path: Path, **values) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(values)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_made_up_words_fill_the_vocabulary(m2m100):
    from mt.interop.m2m100 import m2m100_pieces

    folder, *_ = m2m100
    pieces = m2m100_pieces(folder, ["en", "de"], 420)
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    assert pieces[:4] == ["<s>", "<pad>", "</s>", "<unk>"] and pieces[len(vocab):len(vocab) + 3] == \
        ["__en__", "__de__", "madeupword0000"] and len(pieces) == 420


@pytest.mark.parametrize("source, target", [("de", "en"), ("en", "de")])
def test_beam_outputs_equal_transformers_generate(source, target, tmp_path):
    model = make_m2m100(tmp_path / "hf")
    with torch.no_grad():
        model.model.shared.weight[2] *= 14  # </s> likelier: searches that end before the length limit
    model.save_pretrained(tmp_path / "hf")
    run_mt("import", tmp_path / "hf", "-o", tmp_path / "model.pt")
    tokenizer, checkpoint = M2M100Tokenizer.from_pretrained(tmp_path / "hf"), tmp_path / "model.pt"
    tokenizer.src_lang = source
    batch = tokenizer(SOURCES[source], return_tensors="pt", padding=True)
    found = model.generate(**batch, forced_bos_token_id=tokenizer.get_lang_id(target), num_beams=4, do_sample=False,
                           max_new_tokens=20, length_penalty=0.0, early_stopping=True)
    expected = tokenizer.batch_decode(found[:, 2:], skip_special_tokens=True)
    ended = [tokenizer.eos_token_id in row[2:] for row in found.tolist()]
    ours = translate(checkpoint, SOURCES[source], "--source-lang", source, "--target-lang", target, "--beam-size", "4",
                     "--alpha", "0", "--max-len-a", "0", "--max-len-b", "20")
    # A search that reaches the length limit ends differently in each (mt adds EOS there): the others are compared.
    assert sum(ended) >= 5
    assert [a for a, done in zip(ours, ended) if done] == [b for b, done in zip(expected, ended) if done]
