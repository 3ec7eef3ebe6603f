"""`data.dataset`: anything `datasets` can load, tested on local save_to_disk folders (no hub access)."""

import datasets
import pytest

from mt.config import DataConfig
from mt.data.parallel_text import load_split
from mt.errors import DataError
from tests.conftest import DATA, TINY, run_mt


def _pairs(n, offset=0):
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()[offset:offset + n]
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()[offset:offset + n]
    return de, en


@pytest.fixture
def translation_folder(tmp_path):
    """A DatasetDict shaped like WMT on the hub: {"translation": {"de": ..., "en": ...}}."""
    splits = {}
    for name, (n, offset) in {"train": (600, 0), "validation": (40, 1900)}.items():
        de, en = _pairs(n, offset)
        splits[name] = datasets.Dataset.from_dict({"translation": [{"de": d, "en": e} for d, e in zip(de, en)]})
    path = tmp_path / "wmt-like"
    datasets.DatasetDict(splits).save_to_disk(str(path))
    return path


def test_translation_column_from_a_saved_folder(translation_folder):
    cfg = DataConfig(dataset=str(translation_folder), src_lang="de", tgt_lang="en")
    src, tgt = load_split(cfg, "train")
    assert (src[:3], tgt[:3]) == tuple(x[:3] for x in _pairs(3))
    assert len(load_split(cfg, "dev")[0]) == 40


def test_flat_language_columns(tmp_path):
    de, en = _pairs(50)
    datasets.Dataset.from_dict({"de": de, "en": en}).save_to_disk(str(tmp_path / "flat"))
    src, tgt = load_split(DataConfig(dataset=str(tmp_path / "flat"), src_lang="de", tgt_lang="en"), "train")
    assert src == de and tgt == en


def test_missing_language_or_split_is_a_clear_error(translation_folder):
    with pytest.raises(DataError, match="no language 'fr'"):
        load_split(DataConfig(dataset=str(translation_folder), src_lang="fr", tgt_lang="en"), "train")
    with pytest.raises(DataError, match="no split 'test2013'"):
        load_split(DataConfig(dataset=str(translation_folder), src_lang="de", tgt_lang="en",
                              dev_split="test2013"), "dev")


def test_training_from_a_dataset_through_the_cli(translation_folder, tmp_path):
    run_mt("train", TINY, "--set", f"output_dir={tmp_path / 'run'}", "--set", "data.train_src=null",
           "--set", "data.train_tgt=null", "--set", "data.dev_src=null", "--set", "data.dev_tgt=null",
           "--set", f"data.dataset={translation_folder}", "--set", "data.src_lang=de", "--set", "data.tgt_lang=en",
           "--set", "train.max_steps=4", "--set", "train.eval_every=4", "--set", "train.save_every=4")
    assert (tmp_path / "run" / "checkpoint_last.pt").exists()
    assert (tmp_path / "run" / "checkpoint_best.pt").exists(), "the validation split was used as dev set"
