"""A CTranslate2 model directory read without CTranslate2: model.bin's variables, config.json and the
vocabularies, as CTranslate2's converters write them (`mt import` of a CTranslate2 model or an Argos package).

model.bin (CTranslate2's ModelSpec._serialize, binary versions 4 to 6): a uint32 version, the spec's name and
revision, then each variable as its name, rank, uint32 dimensions, a dtype id, a uint32 byte count and the raw
values, then (name, target) aliases for variables saved once. Strings are a uint16 length (with the NUL) and
the bytes. Quantized weights come with `<name>_scale`: int8 per output row, int16 one number; the stored
integers are round(weight * scale).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from mt.errors import MtError
from mt.files import read_json, read_json_object

BINARY_VERSIONS = range(4, 7)  # 4: dtype ids and byte counts (CTranslate2 2.x); 6: current
DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")  # CTranslate2's DataType ids, in order
NUMPY = {"float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32, "float16": np.float16,
         "bfloat16": np.uint16}


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
        spec, raw, aliases = _parse(data, path)
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise MtError(f"{path}: not a CTranslate2 model.bin, or cut short ({e})") from None
    for alias, target in aliases:
        if target not in raw:
            raise MtError(f"{path}: alias {alias} names {target}, which the file does not hold")
        raw[alias] = raw[target]
        if target + "_scale" in raw:
            raw[alias + "_scale"] = raw[target + "_scale"]
    return spec, _dequantized(raw)


def _parse(data: bytes, path: Path) -> tuple[str, dict[str, np.ndarray], list[tuple[str, str]]]:
    at = 0

    def take(fmt: str):
        nonlocal at
        values = struct.unpack_from("<" + fmt, data, at)
        at += struct.calcsize("<" + fmt)
        return values if len(values) > 1 else values[0]

    def string() -> str:
        nonlocal at
        length = take("H")
        text = data[at:at + length - 1].decode("utf-8")
        at += length
        return text

    version = take("I")
    if version not in BINARY_VERSIONS:
        raise MtError(f"{path}: binary version {version}: mt reads versions {BINARY_VERSIONS[0]} to "
                      f"{BINARY_VERSIONS[-1]} (convert the model again with CTranslate2 3 or later)")
    spec = string()
    take("I")  # the spec's revision
    variables = {}
    for _ in range(take("I")):
        name = string()
        rank = take("B")
        shape = [take("I") for _ in range(rank)]
        dtype, size = DTYPES[take("B")], take("I")
        values = np.frombuffer(data, dtype=NUMPY[dtype], count=size // np.dtype(NUMPY[dtype]).itemsize, offset=at)
        at += size
        variables[name] = (values.reshape(shape), dtype)
    aliases = [(string(), string()) for _ in range(take("I"))]
    return spec, variables, aliases


def _dequantized(raw: dict[str, tuple[np.ndarray, str]]) -> dict:
    """Weights as float32 tensors, `<name>_scale` applied and dropped; 0-d values as Python numbers."""
    out = {}
    for name, (values, dtype) in raw.items():
        if name.endswith("_scale") and name.removesuffix("_scale") in raw:
            continue
        if values.ndim == 0:
            out[name] = values.item()
            continue
        if dtype == "bfloat16":
            tensor = torch.from_numpy(values.astype(np.uint32) << 16).view(torch.float32)
        else:
            tensor = torch.from_numpy(values.astype(np.float32))
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

