"""Training pieces against the paper's formulas, computed by hand."""

import math

import pytest
import torch
import torch.nn.functional as F

from mt.training.recipe import label_smoothed_loss, noam_lr
from mt.symbols import PAD


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
