"""CTranslate2's model.bin as bytes in and out, and its int8 weights in 7 bits so that no CPU saturates them.

model.bin (CTranslate2's ModelSpec._serialize, binary versions 4 to 6): a uint32 version, the spec's name and
revision, then each variable as its name, rank, uint32 dimensions, a dtype id, a uint32 byte count and the raw
values, then (name, target) aliases for variables saved once. Strings are a uint16 length (with the NUL) and the
bytes. Quantized weights come with `<name>_scale`: int8 per output row, int16 one number; the stored integers are
round(weight * scale).

Why 7 bits: a CPU multiplies int8 matrices as unsigned activations (CTranslate2 shifts them by 128: 0..255) times
signed weights. Without VNNI (AVX2 only: AMD EPYC up to Zen 3, Intel before Cascade Lake; AVX-512 without VNNI),
the instruction that does it (vpmaddubsw) adds each pair of products into 16 bits with saturation: 2 x 255 x 127
= 64,770 does not fit in 32,767, so large activations times large weights clip. With weights in -63..63, 2 x 255 x
63 = 32,130 always fits. VNNI adds into 32 bits and never clips; there the seventh bit costs only the precision of
one bit of weight (oneDNN's "nuances of int8 computations"; OpenVINO's NNCF quantizes to 7 bits by default for
the same reason). docs/exporting.md gives the drift measured each way on both kinds of CPU.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import numpy as np

BINARY_VERSIONS = range(4, 7)  # 4: dtype ids and byte counts (CTranslate2 2.x); 6: current
DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")  # CTranslate2's DataType ids, in order
NUMPY = {"float32": np.float32, "int8": np.int8, "int16": np.int16, "int32": np.int32, "float16": np.float16,
         "bfloat16": np.uint16}
INT8_LIMIT = 63  # 7 bits: see the module's docstring
INT8_COMPUTE = ("int8", "int8_float32", "int8_float16", "int8_bfloat16")


@dataclass
class ModelBin:
    """A model.bin's parts: each variable as (values, CTranslate2 dtype name), in the file's order."""
    version: int
    spec: str
    revision: int
    variables: dict[str, tuple[np.ndarray, str]]
    aliases: list[tuple[str, str]] = field(default_factory=list)


class NotModelBin(ValueError):
    """The bytes are not a model.bin that mt reads (the message says why)."""


def parse_model_bin(data: bytes) -> ModelBin:
    """The parts of a model.bin; NotModelBin for another binary version, struct.error or ValueError when cut short."""
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
        raise NotModelBin(f"binary version {version}: mt reads versions {BINARY_VERSIONS[0]} to "
                          f"{BINARY_VERSIONS[-1]} (convert the model again with CTranslate2 3 or later)")
    spec, revision = string(), take("I")
    variables = {}
    for _ in range(take("I")):
        name = string()
        shape = [take("I") for _ in range(take("B"))]
        dtype, size = DTYPES[take("B")], take("I")
        values = np.frombuffer(data, dtype=NUMPY[dtype], count=size // np.dtype(NUMPY[dtype]).itemsize, offset=at)
        at += size
        variables[name] = (values.reshape(shape), dtype)
    aliases = [(string(), string()) for _ in range(take("I"))]
    return ModelBin(version, spec, revision, variables, aliases)


def model_bin_bytes(model: ModelBin) -> bytes:
    """The model.bin of `model`, laid out as CTranslate2 writes it."""
    def string(text: str) -> bytes:
        raw = text.encode("utf-8") + b"\0"
        return struct.pack("<H", len(raw)) + raw

    parts = [struct.pack("<I", model.version), string(model.spec), struct.pack("<II", model.revision,
                                                                               len(model.variables))]
    for name, (values, dtype) in model.variables.items():
        raw = np.ascontiguousarray(values, dtype=NUMPY[dtype]).tobytes()
        parts += [string(name), struct.pack(f"<B{values.ndim}I", values.ndim, *values.shape),
                  struct.pack("<BI", DTYPES.index(dtype), len(raw)), raw]
    parts.append(struct.pack("<I", len(model.aliases)))
    parts += [string(alias) + string(target) for alias, target in model.aliases]
    return b"".join(parts)


def as_float32(values: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "bfloat16":
        return (values.astype(np.uint32) << 16).view(np.float32)
    return values.astype(np.float32)


def quantized_rows(weight: np.ndarray, limit: int = INT8_LIMIT) -> tuple[np.ndarray, np.ndarray]:
    """(int8 values, float32 scale per row) with round(weight * scale) in -limit..limit, each row's largest
    magnitude at the limit; a row of zeros gets scale 1 (CTranslate2's converter does the same with 127)."""
    amax = np.abs(weight).max(axis=1)
    scale = np.where(amax > 0, limit / np.maximum(amax, np.finfo(np.float32).tiny), 1.0).astype(np.float32)
    return np.rint(weight * scale[:, None]).astype(np.int8), scale


def is_weight(name: str, values: np.ndarray) -> bool:
    """A matrix CTranslate2 quantizes for int8 (a linear layer's or an embedding table's `weight`)."""
    return name.endswith("weight") and values.ndim == 2


def in_int8_limit(model: ModelBin, limit: int = INT8_LIMIT) -> ModelBin | None:
    """`model` with every weight matrix in int8 within -limit..limit: float weights quantized, int8 weights beyond
    the limit quantized again from their values (a second rounding); None when every weight already is."""
    variables, changed = dict(model.variables), False
    for name, (values, dtype) in model.variables.items():
        if not is_weight(name, values) or dtype == "int16":
            continue
        if dtype == "int8":
            if int(np.abs(values.astype(np.int16)).max(initial=0)) <= limit:
                continue
            scale = model.variables[name + "_scale"][0].astype(np.float32)
            floats = values.astype(np.float32) / scale[:, None]
        else:
            floats = as_float32(values, dtype)
        quantized, scale = quantized_rows(floats, limit)
        variables[name], variables[name + "_scale"] = (quantized, "int8"), (scale, "float32")
        changed = True
    return ModelBin(model.version, model.spec, model.revision, variables, model.aliases) if changed else None
