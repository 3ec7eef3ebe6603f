"""`mt export`: which writer a format needs, and the options each format takes. CTranslate2's model directory
(mt/interop/ctranslate2.py), Hugging Face's Marian (huggingface.py) or an Argos package (argos.py); importing.py
reads the other way."""

from __future__ import annotations

from pathlib import Path

from mt.errors import MtError
from mt.path_checks import check_input
from mt.interop.argos import DEFAULT_QUANTIZATION, export_argos
from mt.interop.ctranslate2 import export_ctranslate2
from mt.interop.huggingface import export_huggingface

EXPORT_FORMATS = ("ctranslate2", "huggingface", "argos")  # mt export --format


def export_model(paths: list[Path], output: Path, format: str, *, quantization: str | None, force: bool,
                 raw_weights: bool, source_lang: str | None, target_lang: str | None, version: str,
                 sentence_splitter: Path | None, log=print) -> None:
    """Write `output` in `format` from the one checkpoint in `paths`; an option the format does not take, or a
    second checkpoint, is a one-line error naming the option."""
    if format not in EXPORT_FORMATS:
        raise MtError(f"--format: one of {', '.join(EXPORT_FORMATS)}, got '{format}'")
    if len(paths) != 1:
        raise MtError(f"-c: an export is of one checkpoint, got {len(paths)}; average an ensemble's checkpoints "
                      "into one first (mt average)")
    argos_only = {"--source-lang": source_lang, "--target-lang": target_lang, "--sentence-splitter": sentence_splitter,
                  "--version": None if version == "1.0" else version}
    given = next((option for option, value in argos_only.items() if value is not None), None)
    if given and format != "argos":
        raise MtError(f"{given}: for --format argos only")
    if format == "huggingface":
        if quantization is not None:
            raise MtError("--quantization: for --format ctranslate2 and argos; the Hugging Face export is float32")
        log(f"exported {export_huggingface(paths[0], output, force, raw_weights)}")
        return
    if format == "argos":
        check_input(sentence_splitter, "--sentence-splitter")
        package, src, tgt = export_argos(paths[0], output, source_lang, target_lang, version,
                                         quantization or DEFAULT_QUANTIZATION, force, raw_weights, sentence_splitter)
        log(f"exported {package} ({src} -> {tgt}, {quantization or DEFAULT_QUANTIZATION})")
        if sentence_splitter is None:
            log(f"note: no sentence splitter packed; argostranslate downloads MiniSBD's model for '{src}' at first "
                "use (pack one with --sentence-splitter)")
        return
    log(f"exported {export_ctranslate2(paths[0], output, quantization, force, raw_weights)}")
