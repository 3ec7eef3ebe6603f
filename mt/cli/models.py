"""The commands that turn a model into another or describe it: `mt average`, `mt export`, `mt import` and
`mt info`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.cli.path_parameters import comma_separated, files
from mt.cli.shared import RawWeights, SetOption, warn
from mt.errors import MtError


@files(reads=("checkpoints",), writes=("output",), seeks=("checkpoints",))
def average(
    checkpoints: Annotated[Optional[list[Path]], typer.Argument(help="Checkpoints to average.")] = None,
    output: Annotated[Path, typer.Option("-o", "--output")] = Path("checkpoint_avg.pt"),
    last: Annotated[Optional[int], typer.Option(min=1, help="Average the last N step checkpoints of an "
                                                "output_dir.")] = None,
    raw_weights: RawWeights = False,
):
    """Average model parameters (mt average A.pt B.pt -o OUT, or mt average --last 5 OUTPUT_DIR -o OUT)."""
    from mt.checkpoint import average_checkpoints, save_checkpoint, step_checkpoints
    from mt.path_checks import check_output

    paths = list(checkpoints or [])
    if last is not None:
        if len(paths) != 1 or not paths[0].is_dir():
            raise MtError("--last N takes one OUTPUT_DIR")
        found = step_checkpoints(paths[0])
        if len(found) < last:
            raise MtError(f"{paths[0]}: asked for the last {last} checkpoints, found {len(found)}")
        paths = found[-last:]
    check_output(str(output), inputs=_checkpoint_inputs(paths))
    averaged = average_checkpoints(paths, raw_weights)
    save_checkpoint(output, averaged)
    warn(f"averaged {len(paths)} checkpoint{'s' if len(paths) > 1 else ''} into {output}")



def _checkpoint_inputs(checkpoints: list[Path]) -> dict[str, Path]:
    """The checkpoints a command reads, keyed by how an error names them (`-c PATH`), for check_output."""
    return {f"-c{'' if len(checkpoints) == 1 else f' #{i + 1}'}": path for i, path in enumerate(checkpoints)}



@files(reads=("checkpoint", "sentence_splitter"), folders=("output",), expand={"checkpoint": comma_separated},
       seeks=("checkpoint",))
def export(
    checkpoint: Annotated[list[Path], typer.Option("-c", "--checkpoint", help="Checkpoint to export (one).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Model directory to write (a file for argos).")],
    format: Annotated[str, typer.Option("--format", help="ctranslate2 | huggingface | argos.")] = "ctranslate2",
    quantization: Annotated[Optional[str], typer.Option(
        help="ctranslate2 and argos: int8, int8_float32, int8_float16, int8_bfloat16, int16, float16, bfloat16, "
             "float32 (default: float32; argos: int8).")] = None,
    force: Annotated[bool, typer.Option(help="Replace an earlier export, of either format (never a folder "
                                        "holding other files).")] = False,
    raw_weights: RawWeights = False,
    source_lang: Annotated[Optional[str], typer.Option(
        help="argos: the source language code (default: data.src_lang, else the training file's extension).")] = None,
    target_lang: Annotated[Optional[str], typer.Option(
        help="argos: the target language code (as --source-lang).")] = None,
    version: Annotated[str, typer.Option(help="argos: the package version.")] = "1.0",
    sentence_splitter: Annotated[Optional[Path], typer.Option(
        help="argos: a MiniSBD model (LANG.onnx) to pack for argostranslate's sentence splitting.")] = None,
):
    """Write a model directory: CTranslate2's (with the sentencepiece models), which `mt translate -c DIR` reads,
    Hugging Face's Marian (MarianMTModel, MarianTokenizer), or an Argos package (.argosmodel) that argostranslate
    installs and LibreTranslate serves (docs/exporting.md)."""
    from mt.interop.exporting import export_model

    export_model(comma_separated(checkpoint, {}), output, format, quantization=quantization, force=force,
                 raw_weights=raw_weights, source_lang=source_lang, target_lang=target_lang, version=version,
                 sentence_splitter=sentence_splitter, log=warn)


@files(reads=("source",), writes=("output",), seeks=("source",))
def import_(
    source: Annotated[Path, typer.Argument(help="A Hugging Face Marian directory (an OPUS-MT model), a CTranslate2 "
                                                "model directory, or an Argos package (.argosmodel or its folder).")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Checkpoint to write.")],
):
    """Write an mt checkpoint of a Hugging Face Marian (OPUS-MT) model, a CTranslate2 model or an Argos package
    (docs/pretrained.md)."""
    import yaml

    from mt.config import config_to_dict
    from mt.interop.importing import import_model

    cfg = import_model(source, output, log=warn)
    warn(f"imported {source} into {output}; to fine-tune it (train.init_from), a config needs these sections:")
    sections = {k: v for k, v in config_to_dict(cfg).items() if k in ("tokenizer", "model")}
    if cfg.languages.token != "none":  # and each corpus' src_lang and tgt_lang (docs/multilingual.md)
        sections["languages"] = {"token": cfg.languages.token}
    print(yaml.safe_dump(sections, sort_keys=False), end="")


@files(reads=("path",))
def info(path: Path, set_: SetOption = None):
    """Print the architecture and the exact parameter count of a config or a checkpoint."""
    from mt.commands.info import describe

    print(describe(path, set_ or []))
