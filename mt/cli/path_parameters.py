"""The parameters of a command that name files, declared on each command of mt/cli/ with `files(...)` and
checked together before it runs (mt/path_checks.py); the expanders turn a parameter's value into the paths it
stands for (mt clean's -o PREFIX: two files)."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Callable
from pathlib import Path

import typer


@dataclasses.dataclass(frozen=True)
class Files:
    """The parameters of a command that name files: those it reads, the files and the folders it writes, and the
    reads a pipe cannot give (`seeks`: a zip archive, a database, a file read again); `expand` turns a parameter's value into
    the paths it stands for (mt clean's -o PREFIX: two files). Every other read is read once, from start to end,
    so that a pipe (`--src <(zcat corpus.de.gz)`, /dev/stdin) can give it."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    expand: tuple[tuple[str, Callable], ...] = ()
    seeks: tuple[str, ...] = ()

    def paths(self, command, values: dict) -> tuple[list, list, list, list]:
        """[(label, path)] of the reads, of the writes, of the folders and of the reads it seeks in, for the values
        a command was called with: `-c A -c B` gives ("-c #1", A), ("-c #2", B); mt clean's `-o PREFIX` gives
        ("-o", PREFIX.de) and ("-o", PREFIX.en)."""
        expand, signature = dict(self.expand), inspect.signature(command, eval_str=True)

        def labelled(names):
            found = []
            for name in names:
                value = values.get(name)
                paths = expand[name](value, values) if name in expand and value is not None else value
                paths = paths if isinstance(paths, (list, tuple)) else [paths]
                label = option_label(signature.parameters[name])
                numbered = isinstance(value, (list, tuple)) and len(paths) > 1
                found += [(f"{label} #{i + 1}" if numbered else label, path) for i, path in enumerate(paths)
                          if path is not None]
            return found
        return labelled(self.reads), labelled(self.writes), labelled(self.folders), labelled(self.seeks)


def option_label(parameter: inspect.Parameter) -> str:
    """How the command line spells a parameter: its first option name (-o), or an argument's NAME."""
    info = next((x for x in typing.get_args(parameter.annotation)[1:]
                 if isinstance(x, (typer.models.OptionInfo, typer.models.ArgumentInfo))), None)
    if isinstance(info, typer.models.ArgumentInfo):
        return parameter.name.upper()
    declared = [info.default] if info is not None and isinstance(info.default, str) else []
    declared += list(info.param_decls) if info is not None else []
    return next((d for d in declared if d.startswith("-")), f"--{parameter.name.replace('_', '-')}")


def files(reads=(), writes=(), folders=(), expand: dict | None = None, seeks=()):
    """Declares the parameters of a command that name files, and checks them together before it runs (no output is
    an input or another output, none is a folder or unwritable, no read in `seeks` is a pipe: mt/path_checks.py).
    tests/faults/test_command_files.py reads these declarations, so a command added later is checked without a new
    test."""
    declared = Files(tuple(reads), tuple(writes), tuple(folders), tuple((expand or {}).items()), tuple(seeks))

    def declare(command):
        def run(**kwargs):
            from mt.path_checks import check_files

            check_files(*declared.paths(run, kwargs))
            return command(**kwargs)

        run.__name__, run.__doc__, run.files = command.__name__, command.__doc__, declared
        run.__signature__ = inspect.signature(command, eval_str=True)
        return run

    return declare


def clean_outputs(prefix: str, values: dict) -> list[Path]:
    from mt.data.clean import output_paths
    from mt.data.translation_memories import file_format

    if values["tgt"] is None or file_format(values["src"]) != "text":  # a file of both sides: named by language
        langs = [values.get("src_lang"), values.get("tgt_lang")]
        return [Path(f"{prefix}.{lang}") for lang in langs if lang]
    return list(output_paths(prefix, values["src"], values["tgt"], values.get("src_lang"), values.get("tgt_lang")))


def served_paths(specs: list[str], values: dict) -> list[str]:
    """The paths in `SRC:TGT=PATH[,PATH...]` (or `PATH[,PATH...]`) specs, as ModelSpec.parse reads them."""
    return [path for spec in specs for path in (spec.partition("=")[2] if "=" in spec else spec).split(",") if path]


def memory_paths(specs: list[str] | None, values: dict) -> list[str]:
    """The files of `--memory [SRC:TGT=]FILE[,FILE]` values."""
    return [path for spec in specs or [] for path in spec.rpartition("=")[2].split(",") if path]


def comma_separated(paths: list[Path], values: dict) -> list[Path]:
    return [Path(part) for path in paths for part in str(path).split(",") if part]


def metrics_files(run_dirs: list[Path], values: dict) -> list[Path]:
    return [Path(run_dir) / "metrics.jsonl" for run_dir in run_dirs]
