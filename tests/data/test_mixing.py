"""Several training corpora (data.train): batches drawn in the configured shares, resumed exactly, sharded
across ranks without overlap; tags in the prepared data; the log of a two-corpus run."""

import json
from pathlib import Path

import pytest
import torch

from mt.config import data_identity, load_config
from mt.data.corpus import encode_corpus
from mt.data.mixing import MixedSchedule, batch_shares, training_schedule
from mt.data.prepare import prepare_data
from tests.conftest import DATA, TINY, one_error_line, read_metrics, run_mt, tiny_overrides


class _Identity:
    def encode(self, lines):
        return lines


def _corpus(first_token: int, n: int, seed: int):
    """n pairs whose tokens all lie in first_token..first_token+49: a batch's tokens tell its corpus."""
    g = torch.Generator().manual_seed(seed)
    sides = [[torch.randint(first_token, first_token + 50, (int(torch.randint(1, 20, (1,), generator=g)),),
                            generator=g).tolist() for _ in range(n)] for _ in range(2)]
    return encode_corpus(*sides, _Identity(), _Identity(), None)[0]


def _parts():
    return [_corpus(4, 300, seed=0), _corpus(100, 40, seed=1)]  # a big corpus and a small one


def _corpus_of(batch) -> int:
    tokens = batch.src[batch.src >= 4]
    assert bool((tokens < 100).all()) or bool((tokens >= 100).all()), "a batch mixes corpora"
    return int(tokens[0] >= 100)


def test_batches_come_from_the_corpora_in_proportion_to_their_weights():
    schedule = training_schedule(_parts(), 64, [3.0, 1.0], seed=5, rank=0, world=1, pad_to_multiple=1)
    n = 4000
    drawn = [_corpus_of(schedule.next_batch()) for _ in range(n)]
    share = sum(drawn) / n  # the small corpus' share: 0.25, with a standard deviation of 0.0068
    assert abs(share - 0.25) < 0.03, share
    assert batch_shares(schedule.state()) == pytest.approx([1 - share, share])
    # The small corpus (about 9 batches an epoch) went round many epochs; the weights count batches, not pairs.
    assert schedule.schedules[1].epoch > 50


def test_a_mixed_schedule_resumes_exactly_and_ranks_share_out_each_corpus():
    schedule = training_schedule(_parts(), 64, [1.0, 1.0], seed=2, rank=0, world=1, pad_to_multiple=1)
    for _ in range(DRAWS := 5000):  # past the first block of draws
        schedule.next_batch()
    state = json.loads(json.dumps(schedule.state()))  # as a checkpoint stores it
    expected = [schedule.next_batch().src for _ in range(20)]
    resumed = training_schedule(_parts(), 64, [1.0, 1.0], seed=2, rank=0, world=1, pad_to_multiple=1)
    resumed.load_state(state)
    assert all(torch.equal(a, resumed.next_batch().src) for a in expected)
    assert sum(state["drawn"]) == DRAWS

    ranks = [training_schedule(_parts(), 64, [1.0, 1.0], seed=2, rank=r, world=2, pad_to_multiple=1)
             for r in range(2)]
    for _ in range(30):
        a, b = (r.next_batch() for r in ranks)
        assert _corpus_of(a) == _corpus_of(b), "every rank draws the same corpus for an update"
    for k in range(2):
        orders = [r.schedules[k]._order for r in ranks]
        assert not set(orders[0]) & set(orders[1])


def test_caches_and_checkpoints_from_before_data_train_still_match():
    cfg = load_config(TINY, [s for s in tiny_overrides(Path("/tmp/x")) if s != "--set"])
    assert "train" not in data_identity(cfg)["data"]  # an empty list is left out of what they are compared on


def test_one_corpus_is_scheduled_as_with_train_src():
    schedule = training_schedule(_parts()[:1], 64, [1.0], seed=2, rank=0, world=1, pad_to_multiple=1)
    assert not isinstance(schedule, MixedSchedule) and schedule.seed == 2 and "drawn" not in schedule.state()


def _two_corpora(out, **values):
    corpora = (f"[{{src: {DATA / 'sample-2k.de'}, tgt: {DATA / 'sample-2k.en'}, weight: 3}}, "
               f"{{src: {DATA / 'dev.de'}, tgt: {DATA / 'dev.en'}, weight: 1, tag: <BT>}}]")
    return tiny_overrides(out, **{"data.train_src": "null", "data.train_tgt": "null", "data.train": corpora,
                                  **values})


def test_prepare_tags_the_sources_of_a_tagged_corpus(tmp_path):
    cfg = load_config(TINY, [s for s in _two_corpora(tmp_path) if s != "--set"])
    data = prepare_data(cfg, log=lambda m: None)
    tag = data.src_tokenizer.piece_id("<BT>")
    assert tag is not None and data.src_tokenizer.encode(["<BT>"])[0][-1] == tag
    first, second = data.train_parts
    assert len(first) + len(second) == len(data.train)
    assert all(int(second.pair(i)[0][0]) == tag for i in range(len(second)))
    assert not any(int(first.pair(i)[0][0]) == tag for i in range(len(first)))
    assert data.train_parts[1].pair(0)[1].tolist() == data.train.pair(len(first))[1].tolist()


def test_a_two_corpus_run_logs_its_corpora_and_resumes_exactly(tmp_path):
    settings = {"train.max_steps": 12, "train.log_every": 1, "train.save_every": 6, "train.eval_every": 100,
                "train.batch_tokens": 512}
    proc = run_mt("train", TINY, *_two_corpora(tmp_path / "whole", **settings))
    assert "corpus 1 of 2: " in proc.stderr and "weight 3 = 75.0% of the batches" in proc.stderr
    assert "weight 1 = 25.0% of the batches, tag <BT>" in proc.stderr
    assert "batches by corpus " in proc.stderr.strip().splitlines()[-1]
    split = _two_corpora(tmp_path / "split", **settings)
    run_mt("train", TINY, *split, "--set", "train.max_steps=6")
    run_mt("train", TINY, *split)
    whole = [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "whole")]
    assert len(whole) == 12 and [(r["step"], r["loss"]) for r in read_metrics(tmp_path / "split")] == whole


def test_bad_corpus_lists_are_one_line_errors(tmp_path):
    both = run_mt("train", TINY, *_two_corpora(tmp_path / "a", **{"data.train_src": DATA / "dev.de"}), check=False)
    assert "data.train lists the training corpora" in one_error_line(both)
    weight = run_mt("train", TINY, *tiny_overrides(tmp_path / "b", **{
        "data.train_src": "null", "data.train_tgt": "null", "data.train": f"[{{src: {DATA / 'dev.de'}, tgt: x, "
                                                                          "weight: -1}]"}), check=False)
    assert "data.train[0].weight must be positive, got -1.0" in one_error_line(weight)
    missing = run_mt("train", TINY, *_two_corpora(tmp_path / "c", **{"data.train": "[{src: a.de}]"}), check=False)
    assert "data.train[0] needs tgt" in one_error_line(missing)


def test_a_fine_tuning_tag_must_be_in_the_checkpoints_vocabulary(trained_tiny, tmp_path):
    proc = run_mt("train", TINY, *_two_corpora(tmp_path, **{"train.init_from": trained_tiny / "checkpoint_last.pt"}),
                  check=False)
    assert "data.train[1].tag '<BT>' is not a piece of the tokenizer" in one_error_line(proc)




def test_a_multilingual_runs_batches_mix_its_corpora_in_their_temperature_shares_and_resume_exactly():
    from mt.data.mixing import PooledSchedule

    big, small = _parts()
    whole = encode_corpus(*[[c.pair(i)[side].tolist() for c in (big, small) for i in range(len(c))]
                            for side in (0, 1)], _Identity(), _Identity(), None)[0]
    schedule = PooledSchedule(whole, [300, 40], [0.5, 0.5], 64, seed=3)
    first_epoch = [schedule.next_batch() for _ in range(len(schedule.plan))]
    from_small = sum(int((b.src[:, 0] >= 100).sum()) for b in first_epoch)
    assert from_small == 170  # half of the epoch's 340 pairs: the 40 small-corpus pairs four times, then 10 more
    mixed = [bool((b.src[:, 0] >= 100).any() and (b.src[:, 0] < 100).any()) for b in first_epoch]
    assert sum(mixed) >= 0.7 * len(mixed)  # pairs of one length in random order: batches hold both corpora
    second = [schedule.next_batch() for _ in range(5)]
    assert schedule.state()["epoch"] == 2
    resumed = PooledSchedule(whole, [300, 40], [0.5, 0.5], 64, seed=3)
    resumed.load_state({"epoch": 2, "position": 0})
    for batch in second:
        assert torch.equal(resumed.next_batch().src, batch.src)
    with pytest.raises(Exception, match="batches drawn per corpus"):
        resumed.load_state({"drawn": [1, 1], "corpora": []})
