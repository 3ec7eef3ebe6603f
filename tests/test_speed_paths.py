"""The fast paths keep the slow paths' results: vectorised collate, prefetching, device-side skipping,
FLOP counting, the CUDA-count check under torchrun and `mt bench train`."""

import json

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from mt.batching import BatchPrefetcher, BatchSchedule, collate, pad_sequences, training_batches
from mt.config import ModelConfig, TrainConfig
from mt.corpus import encode_corpus
from mt.errors import ConfigError
from mt.flops import training_flops
from mt.masks import padding_mask
from mt.model import build_model
from mt.recipe import make_optimizer
from mt.runtime import setup_runtime
from mt.symbols import BOS, EOS
from mt.update import Learner, apply_update
from tests.conftest import TINY, run_mt, tiny_overrides


class _Identity:
    def encode(self, lines):
        return [list(line) for line in lines]


def _corpus(n=40, seed=0, dtype=None):
    g = torch.Generator().manual_seed(seed)
    src = [torch.randint(4, 60, (int(torch.randint(1, 20, (1,), generator=g)),), generator=g).tolist()
           for _ in range(n)]
    tgt = [torch.randint(4, 60, (int(torch.randint(1, 20, (1,), generator=g)),), generator=g).tolist()
           for _ in range(n)]
    corpus, _ = encode_corpus(src, tgt, _Identity(), _Identity(), None)
    if dtype is not None:
        corpus.src, corpus.tgt = corpus.src.to(dtype), corpus.tgt.to(dtype)
    return corpus


def _collate_one_by_one(corpus, indices):
    """What collate did before it was vectorised: one torch.cat per sentence, then pad_sequence."""
    bos, eos = torch.tensor([BOS]), torch.tensor([EOS])
    pairs = [corpus.pair(i) for i in indices]
    return (pad_sequences([torch.cat([s.long(), eos]) for s, _ in pairs]),
            pad_sequences([torch.cat([bos, t.long()]) for _, t in pairs]),
            pad_sequences([torch.cat([t.long(), eos]) for _, t in pairs]))


@pytest.mark.parametrize("dtype", [None, torch.uint16])
def test_vectorised_collate_equals_the_sentence_loop_and_pads_to_a_multiple(dtype):
    corpus = _corpus(dtype=dtype)
    indices = [3, 17, 0, 25, 9]
    expected = _collate_one_by_one(corpus, indices)
    exact = collate(corpus, indices)
    for ours, theirs in zip((exact.src, exact.tgt_in, exact.tgt_out), expected):
        assert torch.equal(ours, theirs)
    padded = collate(corpus, indices, pad_to_multiple=8)
    for ours, theirs in zip((padded.src, padded.tgt_in, padded.tgt_out), expected):
        assert ours.size(1) % 8 == 0 and ours.size(1) - theirs.size(1) < 8
        assert torch.equal(ours[:, :theirs.size(1)], theirs) and (ours[:, theirs.size(1):] == 0).all()
    assert exact.n_tokens == int((exact.tgt_out != 0).sum())


def test_prefetcher_hands_out_the_stream_in_order_with_exact_positions():
    corpus = _corpus(n=60)
    batches = training_batches(corpus, 64)
    plain = BatchSchedule(corpus, batches, seed=2)
    ahead = BatchPrefetcher(BatchSchedule(corpus, batches, seed=2), torch.device("cpu"), depth=3)
    try:
        for _ in range(len(batches) + 4):  # into the second epoch
            batch = ahead.next_batch()
            assert torch.equal(batch.src, plain.next_batch().src)
            assert ahead.state() == plain.state()
    finally:
        ahead.close()


def test_a_non_finite_update_is_skipped_on_the_device():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    optimizer = make_optimizer(model, TrainConfig())
    optimizer.param_groups[0]["lr"] = 0.1
    learner = Learner(model, model, optimizer, torch.amp.GradScaler("cuda", enabled=False))
    model(torch.randn(2, 4)).sum().backward()
    apply_update(TrainConfig(), learner, torch.tensor(False))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    moments = [optimizer.state[p]["exp_avg"].clone() for p in model.parameters()]
    (model(torch.randn(2, 4)).sum() * float("nan")).backward()
    apply_update(TrainConfig(clip_norm=1.0), learner, torch.tensor(True))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(torch.equal(m, optimizer.state[p]["exp_avg"]) for m, p in zip(moments, model.parameters()))
    assert all(optimizer.state[p]["step"].item() == 1 for p in model.parameters())


def test_flop_formula_counts_every_projection_torch_counts():
    """training_flops = the matmuls torch's FlopCounterMode sees in forward + backward, plus attention."""
    cfg = ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0, max_positions=64)
    model = build_model(cfg, 50, 50, True)
    B, S, T = 3, 10, 7
    src, tgt = torch.randint(4, 50, (B, S)), torch.randint(4, 50, (B, T))
    with FlopCounterMode(display=False) as counter:
        model(src, padding_mask(src), tgt).sum().backward()
    counts = {str(op).split(".")[-1]: n for op, n in counter.get_flop_counts()["Global"].items()}
    projections = counts.get("mm", 0) + counts.get("addmm", 0)
    d, n = cfg.d_model, cfg.n_layers
    attention = 3 * B * n * (4 * S * S * d + 2 * T * T * d + 4 * T * S * d)
    assert training_flops(cfg, 50, torch.full((B,), S), torch.full((B,), T)) == projections + attention


def test_torchrun_with_more_processes_than_gpus_is_refused(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="torchrun started 2 processes on this machine but it has 1 GPU"):
        setup_runtime(TrainConfig(device="cuda"))


def test_bench_train_prints_both_sides_as_json(tmp_path):
    proc = run_mt("bench", "train", TINY, *tiny_overrides(tmp_path), "--steps", "3", "--warmup", "1", "--json")
    result = json.loads(proc.stdout)
    for key in ("tokens_per_s", "reference_tokens_per_s", "ratio", "step_ms", "host_ms_per_step", "tflops", "mfu",
                "peak_tflops", "peak_memory_mb", "device", "precision", "compile"):
        assert key in result, key
    assert result["tokens_per_s"] > 0 and result["reference_tokens_per_s"] > 0 and 0 < result["mfu"] < 1
    assert result["ratio"] == pytest.approx(result["tokens_per_s"] / result["reference_tokens_per_s"], rel=0.01)
    assert result["device"] == "cpu" and result["compile"] is False
