"""`mt export --format huggingface`: transformers loads the directory and decodes exactly as mt does (greedy
token for token, forced-decode log-probabilities, beam search where both length penalties are none), `mt import`
reads it back, Optimum converts it to ONNX and onnxruntime decodes the same, and bad inputs are one line."""

import json

import pytest
import torch
import transformers

from mt.decoding.model_backend import load_model_translator
from mt.config import DecodeConfig, TokenizerConfig
from mt.interop.huggingface import export_huggingface
from mt.masks import padding_mask
from mt.symbols import BOS, EOS, PAD
from mt.data.tokenizer import train_tokenizer
from tests.conftest import DATA, one_error_line, requests_of, run_mt
from tests.interop.conftest import POSITIONS, make_checkpoint

SOURCES = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:24]
REFERENCES = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:24]
MAX_LEN = 30  # target tokens before EOS, for mt; Hugging Face's max_new_tokens counts EOS too
# Option sets Hugging Face's Marian expresses: the paper's model, OPUS-MT's (as `mt import` makes it), separate
# vocabularies (target embedding tied to the output), and an untied output projection.
OPTION_SETS = {
    "paper": ({}, True),
    "opus-mt": ({"activation": "swish", "positions": "concatenated", "output_bias": True, "decoder_start": "pad"},
                True),
    "separate-vocabularies": ({"activation": "swish"}, False),
    "untied-output": ({"share_embeddings": False, "output_bias": True}, True),
    "pre-norm": ({"norm": "pre", "activation": "swish"}, True),  # written as Pegasus
}


@pytest.fixture(scope="module")
def tokenizers():
    train = (DATA / "sample-2k.de").read_text().splitlines(), (DATA / "sample-2k.en").read_text().splitlines()
    joint = train_tokenizer(train[0] + train[1], TokenizerConfig(vocab_size=400))
    return {True: (joint, joint), False: (train_tokenizer(train[0], TokenizerConfig(vocab_size=300, joint=False)),
                                          train_tokenizer(train[1], TokenizerConfig(vocab_size=250, joint=False)))}


@pytest.fixture(scope="module", params=list(OPTION_SETS))
def exported(request, tokenizers, tmp_path_factory):
    """(mt's translator, MarianMTModel, MarianTokenizer, directory) of one option set."""
    changes, joint = OPTION_SETS[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    checkpoint = make_checkpoint(folder / "model.pt", tokenizers, joint, **changes)
    export_huggingface(checkpoint, folder / "hf")
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder / "hf").eval()
    assert type(model).__name__ == ("PegasusForConditionalGeneration" if changes.get("norm") == "pre"
                                    else "MarianMTModel")
    tokenizer = transformers.MarianTokenizer.from_pretrained(folder / "hf")
    return load_model_translator(checkpoint, "cpu"), model, tokenizer, folder / "hf"


def _mt_search(tr, opts: DecodeConfig) -> list[list[int]]:
    sources = tr.src_tokenizer.encode(SOURCES)
    with torch.inference_mode():
        return [h[0].tokens for h in tr.backend.search(requests_of(sources, opts, max_len=MAX_LEN,
                                                                    max_positions=POSITIONS))]


def _unpadded(out) -> list[list[int]]:
    """generate's rows cut at their first EOS (PAD fills after it)."""
    cut = []
    for row in out:
        tokens = row[1:].tolist()
        cut.append(tokens[:tokens.index(EOS)] if EOS in tokens else tokens)
    return cut


def test_the_tokenizer_gives_mt_ids(exported):
    tr, _, tokenizer, _ = exported
    assert tokenizer(SOURCES).input_ids == [ids + [EOS] for ids in tr.src_tokenizer.encode(SOURCES)]
    targets = tr.tgt_tokenizer.encode(REFERENCES)
    assert tokenizer(text_target=REFERENCES).input_ids == [ids + [EOS] for ids in targets]
    assert tokenizer.batch_decode(targets, skip_special_tokens=True) == [tr.tgt_tokenizer.decode(t) for t in targets]


def test_greedy_is_mt_token_for_token(exported):
    tr, model, tokenizer, _ = exported
    ours = _mt_search(tr, DecodeConfig(beam_size=1))
    batch = tokenizer(SOURCES, return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=MAX_LEN + 1)
    print(f"lengths {sorted(len(t) for t in ours)}")
    assert _unpadded(out) == ours
    texts = tokenizer.batch_decode(out, skip_special_tokens=True)  # the decoder start too is left out
    assert texts == [tr.tgt_tokenizer.decode(t) for t in ours]
    assert len({len(t) for t in ours}) > 3, "outputs of varied lengths"


def test_beam_search_is_mt_without_length_penalty(exported):
    """mt's alpha 0 and Hugging Face's length_penalty 0 both rank by the plain log-probability; both stop a
    sentence at beam_size finished hypotheses (early_stopping)."""
    tr, model, tokenizer, _ = exported
    ours = _mt_search(tr, DecodeConfig(beam_size=4, alpha=0.0))
    batch = tokenizer(SOURCES, return_tensors="pt", padding=True)
    with torch.inference_mode():
        out = model.generate(**batch, num_beams=4, length_penalty=0.0, early_stopping=True,
                             max_new_tokens=MAX_LEN + 1)
    # At the length limit Hugging Face forces EOS with log-probability 0 (ForcedEOSTokenLogitsProcessor), mt
    # with the model's: hypotheses that reach it are scored differently; all others are compared.
    pairs = [(a, b) for a, b in zip(_unpadded(out), ours) if len(a) < MAX_LEN and len(b) < MAX_LEN]
    print(f"{sum(a == b for a, b in pairs)} of {len(pairs)} lines that end before the limit the same")
    assert len(pairs) >= len(SOURCES) // 2 and all(a == b for a, b in pairs)


def test_forced_decode_log_probabilities_agree(exported):
    """The references' log-probabilities under both models, every position: this also shows that
    from_pretrained keeps the stored position table (interleaved in the paper's option set)."""
    tr, model, tokenizer, _ = exported
    batch = tokenizer(SOURCES, text_target=REFERENCES, return_tensors="pt", padding=True)
    labels = batch.pop("labels")
    start = model.config.decoder_start_token_id
    decoder_in = torch.cat([torch.full((len(labels), 1), start), labels[:, :-1]], dim=1)
    with torch.inference_mode():
        theirs = model(**batch, decoder_input_ids=decoder_in).logits.log_softmax(-1)
        mt_in = decoder_in.masked_fill(decoder_in == start, BOS) if start == PAD else decoder_in
        mt_in[:, 0] = BOS
        src = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, PAD)
        ours = tr.backend.model(src, padding_mask(src), mt_in).log_softmax(-1)
    real = labels != PAD
    gap = (theirs.gather(-1, labels[..., None]) - ours.gather(-1, labels[..., None]))[..., 0][real].abs().max()
    print(f"largest log-probability difference {gap.item():.2e} over {int(real.sum())} tokens")
    assert gap < 1e-4


def test_round_trip_through_mt_import(exported, tmp_path):
    """`mt import` of the export decodes as the original (Marian, joint vocabularies with a tied output: what
    `mt import` reads)."""
    tr, model, _, folder = exported
    if model.config.model_type != "marian" or not model.config.share_encoder_decoder_embeddings \
            or not model.config.tie_word_embeddings:
        proc = run_mt("import", folder, "-o", tmp_path / "back.pt", check=False)
        assert "error: " in one_error_line(proc)
        return
    run_mt("import", folder, "-o", tmp_path / "back.pt")
    back = load_model_translator(tmp_path / "back.pt", "cpu")
    assert back.cfg.model.positions == tr.cfg.model.positions
    assert back.cfg.model.decoder_start == tr.cfg.model.decoder_start
    for opts in (DecodeConfig(beam_size=1), DecodeConfig(beam_size=4, alpha=0.6)):
        assert _mt_search(back, opts) == _mt_search(tr, opts)


# ---------------------------------------------------------------- the command and its bad inputs

@pytest.fixture(scope="module")
def paper_checkpoint(tokenizers, tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("cli") / "model.pt", tokenizers, True)


def test_the_command_writes_a_complete_directory(paper_checkpoint, tmp_path):
    proc = run_mt("export", "-c", paper_checkpoint, "--format", "huggingface", "-o", tmp_path / "hf")
    assert proc.stderr.strip() == f"exported {tmp_path / 'hf'}"
    assert {p.name for p in (tmp_path / "hf").iterdir()} == {
        "config.json", "generation_config.json", "model.safetensors", "source.spm", "target.spm", "vocab.json",
        "tokenizer_config.json", "tokenizer.json", "README.md"}
    assert [p.name for p in tmp_path.iterdir()] == ["hf"], "no temporary folder left beside it"
    generation = json.loads((tmp_path / "hf" / "generation_config.json").read_text())
    assert (generation["num_beams"], generation["decoder_start_token_id"]) == (4, BOS)
    card = (tmp_path / "hf" / "README.md").read_text()
    assert "sample-2k" not in card and "Dev scores: none recorded" in card  # this checkpoint has no run


def test_tokenizer_json_cuts_as_mt(exported):
    """tokenizer.json (for transformers.js) gives mt's ids, EOS appended, on the whole dev set."""
    from tokenizers import Tokenizer as FastTokenizer

    tr, _, _, folder = exported
    if not (folder / "tokenizer.json").exists():
        assert tr.src_tokenizer.model_proto != tr.tgt_tokenizer.model_proto, "written for a joint vocabulary"
        return
    lines = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()
    fast = FastTokenizer.from_file(str(folder / "tokenizer.json"))
    assert [e.ids for e in fast.encode_batch(lines)] == [ids + [EOS] for ids in tr.src_tokenizer.encode(lines)]


@pytest.mark.parametrize("args, words", [
    (["--format", "onnx"], ["--format: one of ctranslate2, huggingface, argos, got 'onnx'"]),
    (["--format", "huggingface", "--quantization", "int8"], ["--quantization: for --format ctranslate2 and argos"]),
    (["--source-lang", "de"], ["--source-lang: for --format argos only"]),
])
def test_bad_options_are_one_line(paper_checkpoint, tmp_path, args, words):
    line = one_error_line(run_mt("export", "-c", paper_checkpoint, "-o", tmp_path / "hf", *args, check=False))
    assert all(w in line for w in words), line
    assert not (tmp_path / "hf").exists()


def test_an_ensemble_is_refused(paper_checkpoint, tmp_path):
    for checkpoints in (["-c", paper_checkpoint, "-c", paper_checkpoint], ["-c", f"{paper_checkpoint},{paper_checkpoint}"]):
        line = one_error_line(run_mt("export", *checkpoints, "--format", "huggingface", "-o", tmp_path / "hf",
                                     check=False))
        assert "an export is of one checkpoint, got 2; average an ensemble's checkpoints into one first" in line
    assert not (tmp_path / "hf").exists()


def test_pre_norm_with_separate_vocabularies_is_one_line_naming_the_options(tokenizers, tmp_path):
    checkpoint = make_checkpoint(tmp_path / "pre.pt", tokenizers, False, norm="pre")
    line = one_error_line(run_mt("export", "-c", checkpoint, "--format", "huggingface", "-o", tmp_path / "hf",
                                 check=False))
    assert (f"{checkpoint}: model.norm pre with separate source and target embeddings (tokenizer.joint False, "
            "model.share_embeddings True): cannot be exported to Hugging Face") in line
    assert not (tmp_path / "hf").exists()


def test_an_existing_folder_needs_force(paper_checkpoint, tmp_path):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "mine.txt").write_text("kept")
    line = one_error_line(run_mt("export", "-c", paper_checkpoint, "--format", "huggingface", "-o", tmp_path / "hf",
                                 check=False))
    assert f"{tmp_path / 'hf'} exists; remove it or pass --force" in line
    assert (tmp_path / "hf" / "mine.txt").read_text() == "kept"


def test_force_replaces_an_earlier_export_of_either_format_and_nothing_else(paper_checkpoint, tmp_path):
    """A CTranslate2 export replaced by a Hugging Face one and back (each refused the other's model.bin or
    README.md as a file mt export did not write); a file of the user's among an export's is still kept."""
    out = tmp_path / "model"
    run_mt("export", "-c", paper_checkpoint, "--format", "ctranslate2", "-o", out)
    run_mt("export", "-c", paper_checkpoint, "--format", "huggingface", "-o", out, "--force")
    assert (out / "model.safetensors").is_file() and not (out / "model.bin").exists()
    run_mt("export", "-c", paper_checkpoint, "--format", "ctranslate2", "-o", out, "--force")
    assert (out / "model.bin").is_file() and not (out / "model.safetensors").exists()
    (out / "notes.txt").write_text("mine")
    for format in ("huggingface", "ctranslate2"):
        line = one_error_line(run_mt("export", "-c", paper_checkpoint, "--format", format, "-o", out, "--force",
                                     check=False))
        assert line == (f"error: -o {out}: holds notes.txt, which mt export did not write; --force replaces only "
                        "an earlier export: choose another folder")
    assert (out / "notes.txt").read_text() == "mine" and (out / "model.bin").is_file()


def test_a_full_disk_leaves_nothing_half_written(paper_checkpoint, tmp_path):
    """A file-size limit (as a full disk) while writing model.safetensors: one line, and no folder."""
    import resource
    import subprocess
    import sys

    limit = 60_000
    proc = subprocess.run([sys.executable, "-m", "mt", "export", "-c", str(paper_checkpoint), "--format",
                           "huggingface", "-o", str(tmp_path / "out" / "hf")], capture_output=True, text=True,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)))
    line = one_error_line(proc)
    assert line.startswith(f"error: {tmp_path / 'out' / 'hf'}/") and line.endswith(": File too large"), line
    assert list((tmp_path / "out").iterdir()) == [], "no folder, complete or not, and no temporary one"
