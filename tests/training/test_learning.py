"""It learns: exact memorisation, and a synthetic transduction task trained through `mt train`."""

import json
import random
import time

import pytest
import torch

from mt.decoding.model_backend import ModelBackend
from mt.config import DecodeConfig, ModelConfig
from mt.data.batching import collate
from mt.data.corpus import encode_corpus
from mt.decoding.lines import translate_ids
from mt.model.transformer import build_model
from mt.training.recipe import label_smoothed_loss
from mt.symbols import EOS
from tests.conftest import ROOT, TINY, lines_of, read_metrics, run_mt


def test_tiny_model_memorises_64_pairs_exactly():
    torch.manual_seed(0)
    rng = random.Random(0)
    vocab = 40
    pairs = [([rng.randrange(EOS + 1, vocab) for _ in range(rng.randint(3, 9))],
              [rng.randrange(EOS + 1, vocab) for _ in range(rng.randint(3, 9))]) for _ in range(64)]
    corpus, _ = encode_corpus([p[0] for p in pairs], [p[1] for p in pairs], _Identity(), _Identity(), None)
    batch = collate(corpus, list(range(64)))
    model = build_model(ModelConfig(d_model=64, d_ff=128, n_heads=4, n_layers=2, dropout=0.0, max_positions=32),
                        vocab, vocab, joint_vocab=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    exact = False
    for step in range(1, 601):
        loss, _ = label_smoothed_loss(model(batch.src, batch.src_mask, batch.tgt_in),
                                      batch.tgt_out, 0.0)
        optimizer.zero_grad()
        (loss / batch.n_tokens).backward()
        optimizer.step()
        if step % 50 == 0:
            model.eval()
            greedy = DecodeConfig(beam_size=1, alpha=0.0, max_len_a=0.0, max_len_b=12, batch_tokens=4096)
            out = translate_ids(ModelBackend(model), lines_of([p[0] for p in pairs]), greedy)
            model.train()
            exact = [h[0].tokens for h in out] == [p[1] for p in pairs]
            if exact:
                break
    print(f"memorised 64 pairs exactly after {step} steps")
    assert exact


class _Identity:
    """Stands in for a tokenizer: the 'lines' are already id lists."""

    def encode(self, lines):
        return [list(line) for line in lines]


SRC_WORDS = "ka lo mi nu pe ri su ta ve wo xa yu zi bo da fe gu hi jo".split()
TGT_WORDS = "RED BLUE GREEN CAT DOG SUN MOON TREE ROCK FISH BIRD LAKE HILL SNOW RAIN WIND FIRE STAR SAND".split()
DICTIONARY = dict(zip(SRC_WORDS, TGT_WORDS))


def _synthetic(n, rng):
    """Source: random words; target: the words reversed and mapped through a fixed dictionary."""
    src = [[rng.choice(SRC_WORDS) for _ in range(rng.randint(3, 10))] for _ in range(n)]
    return [" ".join(s) for s in src], [" ".join(DICTIONARY[w] for w in reversed(s)) for s in src]


@pytest.mark.slow
def test_synthetic_reverse_and_map_task_reaches_bleu_90(tmp_path):
    """1,600 updates: with the data and training seeded alike (`_synthetic`'s and train.seed), seed 1 reached
    greedy BLEU 95.6 after 1,250 updates and 96.7 after 2,500, seed 2 87.0 after 1,250 and 96.1 after 1,600, seed
    3 93.1 after 1,250, seed 4 97.8 after 1,600: 90 leaves room for a seed's luck and still fails a model that does
    not learn the task."""
    rng = random.Random(1)
    train_src, train_tgt = _synthetic(6000, rng)
    seen = set(train_src)
    dev_src, dev_tgt = [], []
    while len(dev_src) < 200:
        s, t = _synthetic(1, rng)
        if s[0] not in seen:
            dev_src += s
            dev_tgt += t
    for name, lines in [("train.src", train_src), ("train.tgt", train_tgt), ("dev.src", dev_src),
                        ("dev.tgt", dev_tgt)]:
        (tmp_path / name).write_text("\n".join(lines) + "\n")
    start = time.perf_counter()
    run_mt("train", TINY, "--set", f"output_dir={tmp_path / 'run'}",
           "--set", f"data.train_src={tmp_path / 'train.src'}", "--set", f"data.train_tgt={tmp_path / 'train.tgt'}",
           "--set", f"data.dev_src={tmp_path / 'dev.src'}", "--set", f"data.dev_tgt={tmp_path / 'dev.tgt'}",
           "--set", "tokenizer.vocab_size=100", "--set", "model.d_model=128", "--set", "model.d_ff=256",
           "--set", "model.dropout=0.0", "--set", "train.max_steps=1600", "--set", "train.warmup_steps=300",
           "--set", "train.batch_tokens=1500", "--set", "train.lr_scale=0.5",
           "--set", "train.eval_every=800", "--set", "train.save_every=800",
           "--set", "train.log_every=100", timeout=3600)  # a hang guard, not a speed check: busy machines are slow
    trained = time.perf_counter() - start
    result = json.loads(run_mt("evaluate", "-c", tmp_path / "run" / "checkpoint_best.pt", "--src",
                               tmp_path / "dev.src", "--ref", tmp_path / "dev.tgt", "--beam-size", "1",
                               "--json").stdout)
    print(f"synthetic task: greedy BLEU {result['bleu']['score']:.2f} on 200 unseen sentences; "
          f"training took {trained:.0f}s")
    assert result["bleu"]["score"] >= 90
    precision, recall = _reversal_alignment_scores(tmp_path / "run" / "checkpoint_best.pt", dev_src, dev_tgt)
    print(f"synthetic task: word alignment precision {precision:.1%}, recall {recall:.1%} (source word i is "
          "target word n-1-i) on the correctly translated sentences")
    # seeds 1-4 measured 78-89% and 98.7-99.8%: a target word of two pieces whose pieces attend to different source
    # words adds a wrong link; a missed link is rare
    assert precision >= 0.7 and recall >= 0.9


def _reversal_alignment_scores(checkpoint, dev_src: list[str], dev_tgt: list[str]) -> tuple[float, float]:
    """`mt translate --alignment` against the known alignment of the reversal task, over the sentences it
    translated exactly: (share of its links that are right, share of the right links it found)."""
    out = run_mt("translate", "-c", checkpoint, "--beam-size", "1", "--alignment",
                 input="".join(line + "\n" for line in dev_src)).stdout.splitlines()
    found = right = expected = 0
    for src, ref, row in zip(dev_src, dev_tgt, out):
        text, alignment = row.split("\t")
        if text != ref:
            continue
        n = len(src.split())
        links = {tuple(map(int, link.split("-"))) for link in alignment.split()}
        truth = {(i, n - 1 - i) for i in range(n)}
        found, right, expected = found + len(links), right + len(links & truth), expected + len(truth)
    return right / max(found, 1), right / max(expected, 1)


# Calibrated on the 2-core CPU (issue 12): the training loss over updates 176-200 was 6.417 / 6.421 / 6.416 /
# 6.353 for seeds 1-4. With Q, K and V initialised as separate Xavier matrices (in_proj x sqrt 2, the init that
# stalled at the peak learning rate) it was 6.500 / 6.573 / 6.576 for seeds 1-3.
GUARD_LOSS_AT_200 = 6.46


@pytest.mark.slow
def test_learning_per_update_at_the_peak_learning_rate(tmp_path):
    """A quality guard, not a timing: the demo model on the shipped corpus, with fairseq's peak learning rate
    1e-3 reached after 100 updates of 1,024 tokens, must be below GUARD_LOSS_AT_200 after 200 updates."""
    out = tmp_path / "run"
    settings = {"output_dir": out, "data.dev_src": "null", "data.dev_tgt": "null", "train.max_steps": 200,
                "train.warmup_steps": 100, "train.lr_scale": 0.16,  # 0.16 * 256**-0.5 * 100**-0.5 = 1e-3
                "train.batch_tokens": 1024, "train.log_every": 25, "train.eval_every": 10**6,
                "train.save_every": 10**6, "train.keep_last": 0, "train.seed": 1, "train.device": "cpu"}
    overrides = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    run_mt("train", ROOT / "configs" / "demo.yaml", *overrides, timeout=3600)  # a hang guard, not a speed check
    last = read_metrics(out)[-1]
    print(f"training loss over updates 176-200: {last['loss']:.3f} (guard {GUARD_LOSS_AT_200})")
    assert last["step"] == 200 and last["loss"] < GUARD_LOSS_AT_200
