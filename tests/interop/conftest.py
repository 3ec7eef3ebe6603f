"""What the Hugging Face export's tests share: a checkpoint of a small model fitted for a few steps to the sample
corpus, with POSITIONS positions."""

from __future__ import annotations

import torch

from mt.checkpoint import ModelPart, checkpoint_dict, save_checkpoint
from mt.config import Config, DecodeConfig, ModelConfig, TokenizerConfig, config_to_dict
from mt.masks import padding_mask
from mt.model.transformer import build_model
from mt.symbols import BOS, EOS, PAD
from tests.conftest import DATA

POSITIONS = 256
FIT_STEPS, FIT_LINES = 40, 64


def make_checkpoint(path, tokenizers, joint: bool, **changes):
    """A checkpoint of a small model fitted for a few steps to the sample corpus: every weight and bias away
    from its initial value (so that a misplaced tensor shows) and outputs that end at varied lengths."""
    torch.manual_seed(3)
    src, tgt = tokenizers[joint]
    cfg = Config(tokenizer=TokenizerConfig(vocab_size=len(tgt), joint=joint),
                 model=ModelConfig(d_model=32, d_ff=64, n_heads=4, n_layers=2, dropout=0.0,
                                   max_positions=POSITIONS, **changes),
                 decode=DecodeConfig(beam_size=4, alpha=0.0))
    model = build_model(cfg.model, len(src), len(tgt), joint)
    _fit(model, src, tgt)
    part = ModelPart(config=config_to_dict(cfg), model=model.state_dict(), step=FIT_STEPS,
                     src_tokenizer=src.to_tensor(), tgt_tokenizer=tgt.to_tensor())
    save_checkpoint(path, checkpoint_dict(part))
    return path


def _fit(model, src, tgt) -> None:
    """FIT_STEPS Adam steps on the first sample pairs (cut to 24 tokens), one batch."""
    sample = [(DATA / f"sample-2k.{side}").read_text().splitlines()[:FIT_LINES] for side in ("de", "en")]
    x = _padded([ids[:24] + [EOS] for ids in src.encode(sample[0])])
    y = _padded([[BOS] + ids[:24] + [EOS] for ids in tgt.encode(sample[1])])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # these small matrices: threads on a shared CPU only wait for each other
    for _ in range(FIT_STEPS):
        logits = model(x, padding_mask(x), y[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), y[:, 1:].flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    torch.set_num_threads(threads)
    model.eval()


def _padded(rows: list[list[int]]) -> torch.Tensor:
    return torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows], batch_first=True, padding_value=PAD)
