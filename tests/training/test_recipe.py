"""Training pieces against the paper's formulas, computed by hand."""

import copy
import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from mt.config import Config, ModelConfig, TrainConfig
from mt.data.batching import Batch, pad_sequences
from mt.model.transformer import build_model
from mt.runtime import Runtime
from mt.training.recipe import label_smoothed_loss, noam_lr
from mt.training.update import Learner, train_step
from mt.symbols import BOS, EOS, PAD
from tests.conftest import random_sources


@pytest.mark.parametrize("step, expected", [
    (1, 512 ** -0.5 * 4000 ** -1.5),  # warming up: step * warmup^-1.5
    (4000, 512 ** -0.5 * 4000 ** -0.5),  # the peak, about 7.0e-4
    (100000, 512 ** -0.5 * 100000 ** -0.5),  # decaying: step^-0.5
])
def test_learning_rate_schedule_section_5_3(step, expected):
    assert noam_lr(step, 512, 4000) == pytest.approx(expected, rel=1e-12)
    assert noam_lr(step, 512, 4000, lr_scale=2.0) == pytest.approx(2 * expected, rel=1e-12)


def test_peak_learning_rate_value():
    assert noam_lr(4000, 512, 4000) == pytest.approx(6.9877e-4, rel=1e-4)
    assert noam_lr(3999, 512, 4000) < noam_lr(4000, 512, 4000) > noam_lr(4001, 512, 4000)


def test_label_smoothed_loss_by_hand_with_padding_ignored():
    eps, V = 0.1, 4
    logits = torch.tensor([[[2.0, 0.5, -1.0, 0.0], [0.1, 0.2, 3.0, -0.5], [9.0, -9.0, 9.0, 1.0]]])
    target = torch.tensor([[1, 2, PAD]])  # the third position is padding and must not count
    loss, nll = label_smoothed_loss(logits, target, eps)
    expected_loss = expected_nll = 0.0
    for t, y in enumerate([1, 2]):
        log_p = [x - math.log(sum(math.exp(v) for v in logits[0, t].tolist())) for x in logits[0, t].tolist()]
        # smoothed target: (1 - eps) on the label plus eps / V on every class
        expected_loss += -sum(((1 - eps) * (k == y) + eps / V) * log_p[k] for k in range(V))
        expected_nll += -log_p[y]
    assert loss.item() == pytest.approx(expected_loss, rel=1e-6)
    assert nll.item() == pytest.approx(expected_nll, rel=1e-6)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_label_smoothed_loss_and_its_gradient_match_torchs_cross_entropy(eps):
    """The loss, the NLL and the gradient written out in one pass equal torch's cross_entropy, PAD ignored."""
    torch.manual_seed(0)
    logits = torch.randn(3, 5, 11, requires_grad=True)
    target = torch.randint(1, 11, (3, 5))
    target[0, 3:] = PAD
    target[2, 1:] = PAD
    loss, nll = label_smoothed_loss(logits, target, eps)
    (2.0 * loss + 0.5 * nll).backward()
    ours = logits.grad.clone()
    logits.grad = None
    flat, flat_target = logits.view(-1, 11), target.view(-1)
    ref_loss = F.cross_entropy(flat, flat_target, ignore_index=PAD, label_smoothing=eps, reduction="sum")
    ref_nll = F.cross_entropy(flat, flat_target, ignore_index=PAD, reduction="sum")
    (2.0 * ref_loss + 0.5 * ref_nll).backward()
    assert torch.allclose(loss, ref_loss, rtol=1e-6) and torch.allclose(nll, ref_nll, rtol=1e-6)
    assert torch.allclose(ours, logits.grad, atol=1e-6)
    assert ours[2, 1:].abs().max() == 0  # padding gets no gradient


# ---- gradient accumulation (train.accum_steps) ----

ACCUM_MODEL = ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0, max_positions=64)


def _batch(pairs: list[tuple[list[int], list[int]]]) -> Batch:
    """A training batch of (source, target) token-id pairs, padded to its longest."""
    def lengths(side):
        return torch.tensor([len(pair[side]) + 1 for pair in pairs])
    return Batch(pad_sequences([torch.tensor(s + [EOS]) for s, _ in pairs]),
                 pad_sequences([torch.tensor([BOS] + t) for _, t in pairs]),
                 pad_sequences([torch.tensor(t + [EOS]) for _, t in pairs]), lengths(0), lengths(1))


def _after_updates(model, batches: list[Batch], accum_steps: int) -> tuple[torch.Tensor, dict]:
    """train_step over `batches`, `accum_steps` to an update -> (each update's [loss, NLL, tokens], the weights).
    SGD with learning rate 1 makes each update the gradient itself (Adam's first steps move nearly every weight
    by +-lr whatever its gradient's size, so a near-zero gradient rounded to the other sign moves it 2 lr)."""
    model = copy.deepcopy(model).train()
    sgd = torch.optim.SGD(model.parameters(), lr=1.0, fused=True)  # fused: it skips on `found_inf` as Adam does
    learner = Learner(model, model, sgd, torch.amp.GradScaler("cuda", enabled=False))
    cfg = Config(model=ACCUM_MODEL, train=TrainConfig(accum_steps=accum_steps))
    queue = iter(batches)
    prefetcher = SimpleNamespace(next_batch=lambda: next(queue))
    sums = [train_step(cfg, Runtime(torch.device("cpu")), learner, prefetcher)[0]
            for _ in range(len(batches) // accum_steps)]
    return torch.stack(sums), model.state_dict()


def test_accumulated_batches_update_as_one_batch_of_them_all():
    """accum_steps 2 over batches of 38 and 33 target tokens, then 22 and 36, gives the losses and the weights of
    one update per pair of them joined (the gradient of the loss per target token over the whole update), within
    float32 rounding: the weights 1.2e-7 apart where the updates moved them 0.27."""
    torch.manual_seed(0)
    model = build_model(ACCUM_MODEL, 40, 40, joint_vocab=True)
    pairs = list(zip(random_sources(16, 40, 2, 12, seed=1), random_sources(16, 40, 2, 12, seed=2)))
    accumulated, weights = _after_updates(model, [_batch(pairs[i:i + 4]) for i in range(0, 16, 4)], 2)
    joined, joined_weights = _after_updates(model, [_batch(pairs[:8]), _batch(pairs[8:])], 1)
    assert accumulated[:, 2].tolist() == joined[:, 2].tolist() == [71, 58]
    assert torch.allclose(accumulated, joined, rtol=1e-6)
    start = model.state_dict()
    assert max((weights[k] - start[k]).abs().max() for k in start) > 0.1
    assert all(torch.allclose(weights[k], joined_weights[k], rtol=0, atol=1e-6) for k in start)
