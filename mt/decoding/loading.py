"""Which backend decodes: a checkpoint (mt's model), several (an ensemble), or a directory written by `mt export`
(CTranslate2). The commands choose here; the decoding front end (mt/decoding/lines.py) and the training loop's dev
evaluation take a Translator and never reach the CTranslate2 module.
"""

from __future__ import annotations

from pathlib import Path

from mt.decoding.model_backend import load_ensemble_translator, load_model_translator
from mt.decoding.ct2_backend import load_ct2_translator
from mt.decoding.protocol import Translator
from mt.errors import MtError


def load_translator(path: str | Path | list[str | Path], device: str = "auto", quantize: str | None = None,
                    raw_weights: bool = False, ct2_parallel: int = 1) -> Translator:
    """A checkpoint file (mt's model), a directory written by `mt export` (CTranslate2), or a list of
    checkpoints (an ensemble), as a Translator. `quantize="int8"` decodes with int8 weights: mt's dynamic
    quantization (CPU only), or CTranslate2's. `raw_weights`: a checkpoint's last-update weights, not its
    averaged ones (an export holds one set). `ct2_parallel`: batches an exported model decodes at once on a CPU
    (calls from as many threads, as `mt serve` makes)."""
    if isinstance(path, (list, tuple)):
        if len(path) > 1:
            for p in path:
                if Path(p).is_dir():
                    raise MtError(f"{p}: an exported directory cannot join an ensemble (CTranslate2 decodes one "
                                  "model); give checkpoints")
            return load_ensemble_translator(list(path), device, quantize, raw_weights)
        path = path[0]
    if Path(path).is_dir():
        if raw_weights:
            raise MtError(f"{path}: --raw-weights needs a checkpoint; an exported directory holds one set of weights")
        return load_ct2_translator(path, device, quantize, ct2_parallel)
    return load_model_translator(path, device, quantize, raw_weights)
