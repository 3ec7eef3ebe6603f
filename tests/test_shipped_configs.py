"""Every YAML file in configs/ is what its command reads: the training configs each train two updates on the
shipped sample (their sizes cut down, everything else theirs), and configs/clean-crawled.yaml cleans a sample
with its two filters on."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from mt.checkpoint import load_checkpoint
from mt.config import config_to_dict, load_config
from tests.conftest import DATA, ROOT, read_metrics, run_mt

CONFIGS = sorted((ROOT / "configs").glob("*.yaml"))
# A config of `mt clean` holds a clean section alone; every other one is a training config.
CLEAN_CONFIGS = [path for path in CONFIGS if set(yaml.safe_load(path.read_text(encoding="utf-8"))) == {"clean"}]
TRAIN_CONFIGS = [path for path in CONFIGS if path not in CLEAN_CONFIGS]


def test_every_config_loads_and_each_clean_config_has_its_test():
    for path in CONFIGS:
        load_config(path)
    assert [path.name for path in CLEAN_CONFIGS] == ["clean-crawled.yaml"]  # a new one: test it below


def _small(path: Path, out: Path) -> list[str]:
    """`--set` values that make `path` a two-update run on the sample: the shipped corpus or a `datasets` one
    replaced by sample-2k, a 500-piece vocabulary, width 64 (every config's heads divide it), batches of 512
    tokens, no dev evaluation. Depths, heads, norm, accum_steps, precision and the rest stay the config's."""
    values = {"output_dir": out, "data.train_src": DATA / "sample-2k.de", "data.train_tgt": DATA / "sample-2k.en",
              "tokenizer.vocab_size": 500, "model.d_model": 64, "model.d_ff": 128, "train.max_steps": 2,
              "train.batch_tokens": 512, "train.eval_every": 1000, "train.log_every": 1}
    if load_config(path).data.dataset is not None:
        values["data.dataset"] = "null"
    return [f"{key}={value}" for key, value in values.items()]


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=lambda p: p.stem)
def test_a_shipped_training_config_trains(path, tmp_path):
    sets = _small(path, tmp_path / "run")
    run_mt("train", path, *[a for s in sets for a in ("--set", s)])
    ckpt = load_checkpoint(tmp_path / "run" / "checkpoint_last.pt")
    assert ckpt["step"] == 2 and ckpt["config"] == config_to_dict(load_config(path, sets))
    rows = read_metrics(tmp_path / "run")
    assert [r["step"] for r in rows] == [1, 2] and all(math.isfinite(r["loss"]) for r in rows)
    assert all(torch.isfinite(value).all() for value in ckpt["model"].values())


def test_the_crawled_corpus_config_turns_on_numbers(tmp_path):
    """The 2,000 sample pairs, one whose number changed (line 2001) and one whose numbers the target leaves out
    (line 2002). The defaults remove the first (changed_numbers) and keep the second; the config removes both."""
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()
    de += ["Version 3 wurde 2019 freigegeben.", "Es hat 3 Modi, 2 Ansichten und 5 Farben."]
    en += ["Version 4 was released in 2020.", "It has modes, views and colours."]
    (tmp_path / "s.de").write_text("".join(f"{line}\n" for line in de), encoding="utf-8")
    (tmp_path / "s.en").write_text("".join(f"{line}\n" for line in en), encoding="utf-8")

    def clean(*config) -> dict[int, str]:
        run_mt("clean", "--src", tmp_path / "s.de", "--tgt", tmp_path / "s.en", "-o", tmp_path / "out", *config,
               "--rejected", tmp_path / "rejected.tsv", "--set", "clean.misaligned=false")
        rejected = [line.split("\t") for line in (tmp_path / "rejected.tsv").read_text().splitlines()]
        return {int(r[0]): r[1] for r in rejected}

    rejected = clean()
    assert rejected.get(2001) == "changed_numbers" and 2002 not in rejected
    rejected = clean("--config", ROOT / "configs" / "clean-crawled.yaml")
    assert rejected.get(2001) == rejected.get(2002) == "numbers"
    kept = (tmp_path / "out.de").read_text(encoding="utf-8").splitlines()
    assert kept == [line for i, line in enumerate(de, 1) if i not in rejected]
