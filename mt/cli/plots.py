"""`mt plot`: the pictures of the model (positions, masks, attention) and of its training curves."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.cli.path_parameters import files, metrics_files
from mt.cli.shared import warn


plot_app = typer.Typer(no_args_is_help=True, help="Draw the model: positions, masks, attention, training curves.")
PlotOutput = Annotated[Optional[Path], typer.Option("-o", "--output", help="Image file: .png or .svg.")]
PlotShow = Annotated[bool, typer.Option("--show", help="Open a window (needs a display).")]
PlotDpi = Annotated[int, typer.Option(min=10, help="Pixels per inch of a PNG.")]


@plot_app.command("positions")
@files(writes=("output",))
def plot_positions(positions: Annotated[int, typer.Option(min=1)] = 100,
                   dims: Annotated[int, typer.Option(min=2, help="d_model (even).")] = 512,
                   output: PlotOutput = None, show: PlotShow = False, dpi: PlotDpi = 100):
    """The sinusoidal position encodings (positions down, dimensions across) with a colour bar."""
    from mt.commands.plot import plot_positions as draw

    draw(positions, dims, output=output, show=show, dpi=dpi)
    _wrote(output)


@plot_app.command("mask")
@files(writes=("output",))
def plot_mask(size: Annotated[int, typer.Option(min=1)] = 20,
              padding: Annotated[int, typer.Option(min=0, help="Also draw the target mask with N padding.")] = 0,
              output: PlotOutput = None, show: PlotShow = False, dpi: PlotDpi = 100):
    """The subsequent mask, and with --padding the decoder's mask of a padded sentence (True = may attend)."""
    from mt.commands.plot import plot_mask as draw

    draw(size, padding, output=output, show=show, dpi=dpi)
    _wrote(output)


@plot_app.command("attention")
@files(reads=("checkpoint",), writes=("output",), seeks=("checkpoint",))
def plot_attention(
    checkpoint: Annotated[Path, typer.Option("-c", "--checkpoint")],
    text: Annotated[str, typer.Option("--text", help="The source sentence.")],
    target: Annotated[Optional[str], typer.Option(help="Target sentence (default: the greedy translation).")] = None,
    layer: Annotated[Optional[int], typer.Option(help="Layer from 0 (default: the last).")] = None,
    head: Annotated[Optional[int], typer.Option(help="Head from 0 (default: the mean of the heads).")] = None,
    all_heads: Annotated[bool, typer.Option("--all-heads", help="One panel per head.")] = False,
    output: PlotOutput = None, show: PlotShow = False, dpi: PlotDpi = 100,
):
    """Encoder self-, decoder self- and cross-attention weights of one sentence, from a real forward pass."""
    from mt.commands.plot import plot_attention as draw

    draw(checkpoint, text, target, layer, head, all_heads, output=output, show=show, dpi=dpi)
    _wrote(output)


@plot_app.command("curves")
@files(reads=("run_dirs",), writes=("output",), expand={"run_dirs": metrics_files})
def plot_curves(run_dirs: Annotated[list[Path], typer.Argument(help="Training output_dirs.")],
                output: PlotOutput = None, show: PlotShow = False, dpi: PlotDpi = 100):
    """Train and dev loss, dev BLEU and learning rate against step from metrics.jsonl, runs overlaid."""
    from mt.commands.plot import plot_curves as draw

    draw(run_dirs, output=output, show=show, dpi=dpi)
    _wrote(output)


def _wrote(output: Path | None) -> None:
    if output is not None:
        warn(f"wrote {output}")
