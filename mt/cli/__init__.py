"""The `mt` command: parse arguments, call one function, print. User errors are one line on stderr.

Set MT_DEBUG=1 (or pass --debug before the command) to see full tracebacks.

Every command of `mt` is registered here, in the order `mt --help` lists them; each is defined in the module of
its kind (training.py, translating.py, models.py, serving.py, plots.py), with its files declared for
path_parameters.py and its decoding options from decode_options.py; exit_codes.py says how it ends.
"""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from mt.cli import models, plots, serving, training, translating
from mt.cli.exit_codes import run_and_exit
from mt.cli.shared import warn
from mt.tuning import describe, tune_process

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and run the Transformer of 'Attention Is All You Need'.")

_tuning: dict[str, str] = {}  # what main()'s tune_process set, shown by --debug


@app.callback()
def _global(debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks and the process tuning.")]
            = False):
    if debug:
        os.environ["MT_DEBUG"] = "1"
        warn(describe(_tuning))


for command in (training.prepare, training.clean, training.train, training.distill, translating.translate,
                translating.evaluate, translating.score, models.average, serving.serve, serving.adapt, models.export):
    app.command()(command)
app.command("import")(models.import_)
app.command()(models.info)
app.add_typer(serving.suggestions_app, name="suggestions")
app.add_typer(training.bench_app, name="bench")
app.add_typer(plots.plot_app, name="plot")


def main() -> None:
    """`mt`: the process tuned first, then the command, which ends with an exit code of mt/cli/exit_codes.py."""
    _tuning.update(tune_process(sys.argv[1:]))  # before any command imports torch (mt/tuning.py)
    run_and_exit(app)
