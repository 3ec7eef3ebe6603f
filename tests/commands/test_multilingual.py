"""One model, several directions: a tiny model trained on a synthetic task whose outputs show their language (en->de
ends with "ja", en->fr is upper case and ends with "oui", de->en drops the "ja"), through training and its dev log,
exact resume, `mt info`, translating and scoring a direction, averaging, both exports, and one server for every
direction; the bad inputs of a multilingual config and of asking a model for a direction."""

from __future__ import annotations

import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch

from mt.checkpoint import load_checkpoint
from mt.config import load_config
from mt.data.languages import temperature_weights
from mt.data.tokenizer import Tokenizer
from mt.decoding.model_backend import load_model_translator
from mt.errors import ConfigError
from tests.conftest import TINY, RunningServer, one_error_line, read_metrics, run_mt, tiny_overrides

WORDS = "apple house river stone cloud green music table window garden paper light night water forest bread".split()
DIRECTIONS = {  # direction: (training pairs, how its target is made from an English line)
    ("en", "de"): (3000, lambda s: s + " ja"),
    ("en", "fr"): (1500, lambda s: s.upper() + " oui"),
    ("de", "en"): (3000, None),  # the reverse of en->de
}
SETTINGS = {"tokenizer.vocab_size": 200, "model.dropout": 0.0, "model.max_positions": 128, "train.max_steps": 400,
            "train.warmup_steps": 60, "train.lr_scale": 0.3, "train.eval_every": 100, "train.save_every": 200,
            "decode.max_len_b": 20}


def _english(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))) for _ in range(n)]


def _write(folder: Path, name: str, lines: list[str]) -> str:
    (folder / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(folder / name)


def _corpus(folder: Path, split: str, source: str, target: str, n: int, seed: int) -> dict:
    english = _english(n, seed)
    german = [s + " ja" for s in english]
    sides = {("en", "de"): (english, german), ("en", "fr"): (english, [s.upper() + " oui" for s in english]),
             ("de", "en"): (german, english)}[(source, target)]
    stem = f"{split}.{source}-{target}"
    return {"src": _write(folder, f"{stem}.src", sides[0]), "tgt": _write(folder, f"{stem}.tgt", sides[1]),
            "src_lang": source, "tgt_lang": target}


def multilingual_config(folder: Path, out: Path, train_pairs: dict | None = None) -> Path:
    """A config of the three directions (or `train_pairs`' sizes) over the tiny one, its files in `folder`."""
    sizes = train_pairs or {d: n for d, (n, _) in DIRECTIONS.items()}
    train = [_corpus(folder, "train", *d, n, seed=k + 1) for k, (d, n) in enumerate(sizes.items())]
    dev = [_corpus(folder, "dev", *d, 40, seed=100 + k) for k, d in enumerate(sizes)]
    text = TINY.read_text(encoding="utf-8")
    text = re.sub(r"(?ms)^data:\n.*?(?=^tokenizer:)", "data:\n  max_len: 64\n  pad_to_multiple: 1\n  train:\n" +
                  "".join(f"    - {entry}\n".replace("'", '"') for entry in train) + "  dev:\n" +
                  "".join(f"    - {entry}\n".replace("'", '"') for entry in dev), text)
    text = text.replace("output_dir: runs/tiny", f"output_dir: {out}")
    path = folder / "multilingual.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def settings_args(**values) -> list[str]:
    return [a for key, value in {**SETTINGS, **values}.items() for a in ("--set", f"{key}={value}")]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    """The tiny multilingual model, trained through the CLI."""
    folder = tmp_path_factory.mktemp("multilingual")
    config = multilingual_config(folder, folder / "run")
    trained = run_mt("train", config, *settings_args())
    (folder / "train.log").write_text(trained.stderr, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def checkpoint(run) -> Path:
    return run / "run" / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def dev_english(run) -> list[str]:
    return (run / "dev.en-de.src").read_text(encoding="utf-8").splitlines()


def translate(model: Path, lines: list[str], *options: str) -> list[str]:
    return run_mt("translate", "-c", model, *options,
                  input="".join(line + "\n" for line in lines)).stdout.splitlines()


def in_language(outputs: list[str], target: str) -> float:
    """The share of outputs that carry the synthetic language's mark."""
    marks = {"de": lambda t: t.endswith(" ja"), "fr": lambda t: t.endswith(" oui") and t[:-4] == t[:-4].upper(),
             "en": lambda t: t and not t.endswith("ja") and not t.endswith("oui") and t == t.lower()}
    return sum(map(marks[target], outputs)) / len(outputs)


def test_each_direction_translates_into_its_own_language(checkpoint, run, dev_english):
    german = (run / "dev.de-en.src").read_text(encoding="utf-8").splitlines()
    for source, target, lines in (("en", "de", dev_english), ("en", "fr", dev_english), ("de", "en", german)):
        outputs = translate(checkpoint, lines, "--source-lang", source, "--target-lang", target)
        assert in_language(outputs, target) >= 0.9, (source, target, outputs[:5])
    assert translate(checkpoint, dev_english[:5], "--target-lang", "de") == \
        translate(checkpoint, dev_english[:5], "--source-lang", "en", "--target-lang", "de")


def test_the_decoder_is_told_the_target_and_learns_to_use_the_source_sooner(run, checkpoint, dev_english):
    """languages.token both (the default with several targets): >>xx<< starts the source and the output. Told the
    target in its source only (languages.token target), this model's dev loss at update 100 was 1.18 (greedy BLEU
    29 / 28 / 17), and the demo's model of four directions hardly used its source (docs/multilingual.md)."""
    at_100 = next(row for row in read_metrics(run / "run", "dev") if row["step"] == 100)
    assert at_100["loss"] < 0.8, at_100
    german = load_model_translator(checkpoint, "cpu").toward("en", "de", str(checkpoint))
    token = german.tgt_tokenizer.piece_id(">>de<<")
    assert german.source_prefix == german.target_prefix == (token,)
    outputs = translate(checkpoint, dev_english[:20], "--target-lang", "fr", "--beam-size", "1")
    assert not any(">>" in out for out in outputs) and in_language(outputs, "fr") >= 0.9


def test_training_balances_the_vocabulary_samples_the_corpora_by_temperature_and_scores_each_direction(run):
    log = (run / "train.log").read_text(encoding="utf-8")
    assert "1500 lines of each of de, en, fr" in log  # as many as French, the language with fewest
    shares = [float(x) for x in re.findall(r"([\d.]+)% of each epoch's pairs \([\d.]+ times its own\), in batches "
                                           r"that mix the corpora", log)]
    assert shares == pytest.approx([100 * w for w in temperature_weights([3000, 1500, 3000], 5.0)], abs=0.1)
    dev = read_metrics(run / "run", "dev")[-1]
    each = [dev[f"bleu_{d}"] for d in ("en-de", "en-fr", "de-en")]
    assert dev["bleu"] == pytest.approx(sum(each) / 3, abs=0.01) and min(each) > 30
    assert re.search(r"BLEU [\d.]+ \(greedy, en-de [\d.]+, en-fr [\d.]+, de-en [\d.]+", log)


def test_temperature_weights_follow_arivazhagan():
    assert temperature_weights([100, 900], 1.0) == pytest.approx([0.1, 0.9])
    raw = [0.1 ** 0.2, 0.9 ** 0.2]
    assert temperature_weights([100, 900], 5.0) == pytest.approx([w / sum(raw) for w in raw])
    assert temperature_weights([100, 900], 1e6) == pytest.approx([0.5, 0.5], abs=1e-5)


def test_info_lists_the_directions_and_the_checkpoint_records_them(checkpoint):
    assert "directions: en:de, en:fr, de:en; a >>xx<< token before the source and first in the output names the " \
           "target" in run_mt("info", checkpoint).stdout
    languages = load_checkpoint(checkpoint)["config"]["languages"]
    assert languages == {"directions": ["en:de", "en:fr", "de:en"], "token": "both", "codes": []}


def test_a_multilingual_run_resumes_exactly(tmp_path):
    config = multilingual_config(tmp_path, tmp_path / "x", {("en", "de"): 300, ("en", "fr"): 200})
    quick = {"train.save_every": 4, "train.eval_every": 100, "data.dev": "[]"}
    run_mt("train", config, *settings_args(**quick, output_dir=tmp_path / "a", **{"train.max_steps": 8}))
    run_mt("train", config, *settings_args(**quick, output_dir=tmp_path / "b", **{"train.max_steps": 4}))
    resumed = run_mt("train", config, *settings_args(**quick, output_dir=tmp_path / "b", **{"train.max_steps": 8}))
    assert "at step 4" in resumed.stderr
    a, b = (load_checkpoint(tmp_path / r / "checkpoint_last.pt")["model"] for r in "ab")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_scoring_a_pair_depends_on_the_target_asked_for(checkpoint, run, tmp_path):
    src = _write(tmp_path, "src", ["river stone"] * 2)
    tgt = _write(tmp_path, "tgt", ["river stone ja", "RIVER STONE oui"])
    scores = {t: [float(x) for x in run_mt("score", "-c", checkpoint, "--src", src, "--tgt", tgt, "--target-lang",
                                           t).stdout.split()] for t in ("de", "fr")}
    assert scores["de"][0] > scores["fr"][0] and scores["fr"][1] > scores["de"][1]


def test_averaged_and_exported_models_keep_the_directions_and_translate_alike(checkpoint, run, dev_english,
                                                                              tmp_path):
    averaged = tmp_path / "averaged.pt"
    run_mt("average", run / "run" / "checkpoint_200.pt", checkpoint, "-o", averaged)
    assert "directions: en:de" in run_mt("info", averaged).stdout
    run_mt("export", "-c", checkpoint, "-o", tmp_path / "ct2")
    lines, greedy = dev_english[:20], ("--beam-size", "1", "--max-len-a", "0", "--max-len-b", "20")
    for target in ("de", "fr"):
        ours = translate(checkpoint, lines, "--target-lang", target, *greedy)
        assert translate(tmp_path / "ct2", lines, "--target-lang", target, *greedy) == ours


def test_the_hugging_face_export_is_asked_for_a_target_as_opus_mt_models_are(checkpoint, dev_english, tmp_path):
    from transformers import MarianMTModel, MarianTokenizer

    run_mt("export", "-c", checkpoint, "-o", tmp_path / "hf", "--format", "huggingface")
    assert "`>>de<< text`" in (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    assert "forced_bos_token_id" in (tmp_path / "hf" / "README.md").read_text(encoding="utf-8")
    tokenizer, model = MarianTokenizer.from_pretrained(tmp_path / "hf"), MarianMTModel.from_pretrained(tmp_path / "hf")
    lines = dev_english[:10]
    for target in ("de", "fr"):
        ours = translate(checkpoint, lines, "--target-lang", target, "--beam-size", "1", "--max-len-a", "0",
                         "--max-len-b", "20")
        token = tokenizer.convert_tokens_to_ids(f">>{target}<<")
        batch = tokenizer([f">>{target}<< {line}" for line in lines], return_tensors="pt", padding=True)
        found = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=21, forced_bos_token_id=token)
        assert (found[:, 1] == token).all()  # after the decoder's start, as mt forces it
        assert tokenizer.batch_decode(found[:, 2:], skip_special_tokens=True) == ours


def test_one_server_serves_every_direction_in_one_running_batch(checkpoint, dev_english):
    running = RunningServer(checkpoint, spec=str(checkpoint))
    try:
        languages = running.get("/languages").json()
        assert {x["code"]: x["targets"] for x in languages} == {"en": ["de", "fr"], "de": ["en"], "fr": []}
        lines = dev_english[:16]
        targets = ["de", "fr"] * 8
        expected = {t: translate(checkpoint, lines, "--target-lang", t) for t in ("de", "fr")}
        together = threading.Barrier(len(lines))

        def ask(i: int) -> str:
            together.wait(timeout=60)
            body = {"q": lines[i], "source": "en", "target": targets[i]}
            return running.post("/translate", json=body).json()["translatedText"]
        with ThreadPoolExecutor(len(lines)) as pool:
            answers = list(pool.map(ask, range(len(lines))))
        assert answers == [expected[t][i] for i, t in enumerate(targets)]
        rows = re.search(r"^mt_decode_step_rows_count (\S+)", running.get("/metrics").text, re.M)
        steps = float(rows.group(1))
        sequential = 1 + sum(len(expected[t][i].split()) + 1 for i, t in enumerate(targets))
        assert steps < sequential / 2  # the 16 requests of two directions shared their steps
        refused = running.post("/translate", json={"q": "x", "source": "de", "target": "fr"})
        assert refused.status_code == 400 and "en-de, en-fr, de-en" in refused.json()["error"]
    finally:
        assert running.stop() == 0


def test_asking_for_a_direction_the_model_lacks_is_one_line(checkpoint, trained_tiny):
    cases = [((), "translates en:de, en:fr, de:en; say which target with --target-lang"),
             (("--target-lang", "it"), "translates en:de, en:fr, de:en, not into it"),
             (("--source-lang", "de", "--target-lang", "fr"), "not de:fr"),
             (("--source-lang", "fr"), "not from fr")]
    for options, message in cases:
        assert message in one_error_line(run_mt("translate", "-c", checkpoint, *options, input="x\n", check=False))
    bilingual = run_mt("translate", "-c", trained_tiny / "checkpoint_last.pt", "--target-lang", "en", input="x\n",
                       check=False)
    assert "trained on one direction without languages named" in one_error_line(bilingual)
    served = run_mt("serve", "-m", trained_tiny / "checkpoint_last.pt", "--port", "0", check=False)
    assert "the model names no languages; give them: -m SRC:TGT=" in one_error_line(served)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace('"src_lang": "en", "tgt_lang": "fr"', '"tgt_lang": "fr"', 1),
     "data.train[1].src_lang is missing"),
    (lambda t: t.replace('"tgt_lang": "fr"', '"tgt_lang": "French"', 1),
     "data.train[1].tgt_lang must be a language code such as de, fra or zho_Hans, got 'French'"),
    (lambda t: t.replace('"src_lang": "de", "tgt_lang": "en"}\n  dev:', '"src_lang": "de", "tgt_lang": "it"}\n  dev:'),
     "data.dev[2] is a dev set of de:en, a direction data.train has no corpus of"),
    (lambda t: t + "languages:\n  directions: [en:de]\n", "languages.directions en:de: set from data.train's"),
    (lambda t: t.replace("  dev:\n", "  dev_src: a\n  dev:\n"), "data.dev lists the dev sets with their languages"),
    (lambda t: t.replace("  max_len: 64", "  temperature: 0"), "data.temperature must be a positive number, got 0"),
])
def test_a_broken_multilingual_config_is_one_line_naming_the_key(run, change, message, tmp_path):
    config = tmp_path / "broken.yaml"
    config.write_text(change((run / "multilingual.yaml").read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(config)
    assert message in one_error_line(run_mt("train", config, check=False))
    assert not (tmp_path / "run").exists()


def test_a_target_token_the_vocabulary_splits_is_refused(tmp_path):
    """Fine-tuning a bilingual model as a multilingual one: its vocabulary has no >>xx<< pieces."""
    config = multilingual_config(tmp_path, tmp_path / "ft", {("en", "de"): 50, ("en", "fr"): 50})
    bilingual = tmp_path / "bilingual"
    run_mt("train", TINY, *tiny_overrides(bilingual, **{"train.max_steps": 1, "data.dev_src": "null",
                                                       "data.dev_tgt": "null"}))
    proc = run_mt("train", config, "--set", f"train.init_from={bilingual / 'checkpoint_last.pt'}", check=False)
    assert ">>de<< is not one piece of the source vocabulary" in one_error_line(proc)
    assert not (tmp_path / "ft" / "checkpoint_last.pt").exists()


def test_an_argos_package_of_a_multilingual_model_is_refused(checkpoint, tmp_path):
    proc = run_mt("export", "-c", checkpoint, "--format", "argos", "-o", tmp_path / "x.argosmodel", check=False)
    assert "argostranslate cannot add (it adds only a target prefix)" in one_error_line(proc)
    assert list(tmp_path.iterdir()) == []


def test_a_model_trained_with_m2m100_tokens_is_told_both_languages(tmp_path):
    """languages.token m2m100 from scratch: __src__ before the source, __tgt__ forced as the first output."""
    config = multilingual_config(tmp_path, tmp_path / "m", {("en", "de"): 200, ("en", "fr"): 200})
    quick = {"train.max_steps": 2, "train.save_every": 2, "train.eval_every": 2, "languages.token": "m2m100"}
    run_mt("train", config, *settings_args(**quick))
    checkpoint = tmp_path / "m" / "checkpoint_last.pt"
    pieces = Tokenizer.from_tensor(load_checkpoint(checkpoint)["src_tokenizer"])
    assert all(pieces.piece_id(f"__{lang}__") is not None for lang in ("en", "de", "fr"))
    assert len(translate(checkpoint, ["river stone"], "--source-lang", "en", "--target-lang", "fr")) == 1
    refused = run_mt("translate", "-c", checkpoint, "--target-lang", "fr", input="x\n", check=False)
    assert "is told the source language; say which with --source-lang" in one_error_line(refused)


def test_every_decoding_feature_asks_for_the_direction(checkpoint, dev_english):
    lines = dev_english[:20]
    for target in ("de", "fr"):
        asked = ("--source-lang", "en", "--target-lang", target)
        greedy = translate(checkpoint, lines, *asked, "--beam-size", "1")
        assert in_language(greedy, target) >= 0.9
        nbest = [row.split("\t") for row in translate(checkpoint, lines, *asked, "--nbest", "2")]
        assert [int(row[0]) for row in nbest] == [i for i in range(len(lines)) for _ in range(2)]
        assert in_language([row[2] for row in nbest[::2]], target) >= 0.9  # each line's best
        assert translate(checkpoint, lines, *asked, "--beam-size", "1", "--sampling", "--topk", "1") == greedy
        assert translate(checkpoint, lines, *asked, "--beam-size", "1", "-c", checkpoint) == greedy  # an ensemble
        assert in_language(translate(checkpoint, lines, *asked, "--quantize", "int8"), target) >= 0.9
        first = [line.split()[0] for line in greedy]
        prefixed = translate(checkpoint, [f"{s}\t{p}" for s, p in zip(lines, first)], *asked, "--prefix")
        assert all(out.startswith(p) for out, p in zip(prefixed, first)) and in_language(prefixed, target) >= 0.9
        # A word of its own translation as the term: a forced word the model would not write displaces its mark.
        constrained = translate(checkpoint, [f"{s}\t{w}" for s, w in zip(lines, first)], *asked, "--constraints")
        assert all(w in out for w, out in zip(first, constrained)) and in_language(constrained, target) >= 0.9
