"""The decoding options of the command line: an option for every field of DecodeConfig, and `--set
decode.key=value`, declared once in `with_decode_options` for every decoding command of mt/cli/."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Annotated, Optional

import typer

from mt.config import DecodeConfig, decode_with, field_comments


class DecodeChoices:
    """The decoding options given on the command line: one per DecodeConfig field, and `--set decode.key=value`."""

    def __init__(self, values: dict, sets: list[str]):
        self.values, self.sets = values, sets

    def applied_to(self, cfg):
        return decode_with(cfg, self.sets, self.values)


def with_decode_options(command):
    """Gives `command` an option for every field of DecodeConfig (--beam-size, --alpha, ..., its comment the
    help) and `--set decode.key=value`, declared here once for every decoding command; the command receives
    them as `decode`, a DecodeChoices."""
    comments, names = field_comments(DecodeConfig), [f.name for f in dataclasses.fields(DecodeConfig)]
    kinds = {name: type(getattr(DecodeConfig(), name)) for name in names}
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "decode"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        Optional[kinds[name]], typer.Option(f"--{name.replace('_', '-')}", help=comments.get(name))]) for name in names]
    added.append(inspect.Parameter("decode_set", inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[
        Optional[list[str]], typer.Option("--set", help="Override a decode value: decode.key=value")]))

    def run(**kwargs):
        choices = DecodeChoices({name: kwargs.pop(name) for name in names}, kwargs.pop("decode_set") or [])
        return command(**kwargs, decode=choices)

    run.__name__, run.__doc__ = command.__name__, command.__doc__
    run.__signature__ = inspect.Signature([*own, *added])
    return run
