"""What the command modules share: the options several commands take, `warn` (a line on stderr), and the checks of
--device and --quantize made before any work."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from mt.errors import MtError

SetOption = Annotated[Optional[list[str]], typer.Option("--set", help="Override a config value: section.key=value")]
SourceLang = Annotated[Optional[str], typer.Option("--source-lang", help="A multilingual model's source language "
                                                   "code (checked against the directions it knows).")]
TargetLang = Annotated[Optional[str], typer.Option("--target-lang", help="A multilingual model's target language "
                                                   "code (`mt info` lists its directions).")]
RawWeights = Annotated[bool, typer.Option("--raw-weights", help="A checkpoint's last-update weights, not its "
                                          "moving average (train.ema_decay).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")]


def warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def check_device(device: str) -> None:
    """Before any work: a device name mt does not know is a one-line error."""
    from mt.runtime import check_device_name

    check_device_name(device, "--device")


def check_quantize(quantize: str | None) -> None:
    if quantize not in (None, "int8"):
        raise MtError(f"--quantize: only int8 is supported, got '{quantize}'")
