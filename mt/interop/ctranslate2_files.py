"""A CTranslate2 model directory read without CTranslate2: model.bin's variables, config.json and the
vocabularies, as CTranslate2's converters write them (`mt import` of a CTranslate2 model or an Argos package).

model.bin's layout is read by mt/decoding/ct2_model_bin.py; here its weights are de-quantized to float32 tensors.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mt.decoding.ct2_model_bin import NotModelBin, as_float32, parse_model_bin
from mt.errors import MtError
from mt.atomic_files import read_json, read_json_object


@dataclass
class Ct2Model:
    """A CTranslate2 model directory's contents: the spec's name, every variable (weights de-quantized to
    float32 tensors; flags and sizes as Python numbers), config.json, and the vocabularies' tokens."""
    spec: str
    variables: dict[str, torch.Tensor | int | float]
    config: dict
    source_vocabulary: list[str]
    target_vocabulary: list[str]


def read_ct2_model(directory: Path) -> Ct2Model:
    spec, variables = read_model_bin(directory / "model.bin")
    config_path = directory / "config.json"
    config = read_json_object(config_path) if config_path.is_file() else {}
    source, target = read_vocabularies(directory)
    return Ct2Model(spec, variables, config, source, target)


def read_model_bin(path: Path) -> tuple[str, dict]:
    """(spec name, {variable: value}) of a model.bin; aliases resolved, int8/int16 weights de-quantized."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise MtError(f"{path}: cannot read ({e.strerror})") from None
    try:
        model = parse_model_bin(data)
    except NotModelBin as e:
        raise MtError(f"{path}: {e}") from None
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise MtError(f"{path}: not a CTranslate2 model.bin, or cut short ({e})") from None
    raw, aliases = model.variables, model.aliases
    for alias, target in aliases:
        if target not in raw:
            raise MtError(f"{path}: alias {alias} names {target}, which the file does not hold")
        raw[alias] = raw[target]
        if target + "_scale" in raw:
            raw[alias + "_scale"] = raw[target + "_scale"]
    return model.spec, _dequantized(raw)


def _dequantized(raw: dict[str, tuple[np.ndarray, str]]) -> dict:
    """Weights as float32 tensors, `<name>_scale` applied and dropped; 0-d values as Python numbers."""
    out = {}
    for name, (values, dtype) in raw.items():
        if name.endswith("_scale") and name.removesuffix("_scale") in raw:
            continue
        if values.ndim == 0:
            out[name] = values.item()
            continue
        tensor = torch.from_numpy(as_float32(values, dtype))
        scale = raw.get(name + "_scale")
        if scale is not None:
            scale = torch.from_numpy(scale[0].astype(np.float32))
            tensor = tensor / (scale[:, None] if scale.ndim == 1 else scale)
        out[name] = tensor
    return out


def read_vocabularies(directory: Path) -> tuple[list[str], list[str]]:
    """(source tokens, target tokens): shared_vocabulary, or source_ and target_vocabulary, each .json (a list)
    or .txt (one token a line, older converters)."""
    shared = _vocabulary(directory, "shared")
    if shared is not None:
        return shared, shared
    source, target = _vocabulary(directory, "source"), _vocabulary(directory, "target")
    if source is None or target is None:
        raise MtError(f"{directory}: no shared_vocabulary.json, or no source_vocabulary.json and "
                      "target_vocabulary.json (nor their .txt forms)")
    return source, target


def _vocabulary(directory: Path, side: str) -> list[str] | None:
    json_path, txt_path = directory / f"{side}_vocabulary.json", directory / f"{side}_vocabulary.txt"
    if json_path.is_file():
        tokens = read_json(json_path)
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise MtError(f"{json_path}: not a JSON list of tokens")
        return tokens
    if txt_path.is_file():
        return txt_path.read_text(encoding="utf-8").split("\n")[:-1]
    return None

