"""`mt import`: which reader a path needs. An Argos package (an .argosmodel file, or an installed package's folder
with metadata.json), a CTranslate2 model directory (model.bin), or a Hugging Face Marian or M2M100 directory."""

from __future__ import annotations

from pathlib import Path

from mt.config import Config
from mt.errors import MtError
from mt.interop.argos import opened_package
from mt.interop.ctranslate2_import import import_ctranslate2
from mt.interop.m2m100 import import_m2m100, is_m2m100
from mt.interop.marian import import_marian


def import_model(source: Path, output: Path, log=print) -> Config:
    """Write the mt checkpoint `output` of the model at `source`; returns its config."""
    if not source.exists():
        raise MtError(f"{source}: no such file or folder")
    if source.is_file() or (source / "metadata.json").is_file():
        with opened_package(source) as (folder, metadata):
            return import_ctranslate2(folder / "model", output, log,
                                      languages=(metadata["from_code"], metadata["to_code"]))
    if (source / "model.bin").is_file():
        return import_ctranslate2(source, output, log)
    if (source / "config.json").is_file():
        return import_m2m100(source, output, log) if is_m2m100(source) else import_marian(source, output, log)
    raise MtError(f"{source}: none of a Hugging Face Marian or M2M100 directory (config.json), a CTranslate2 model "
                  "(model.bin) and an Argos package (metadata.json)")
