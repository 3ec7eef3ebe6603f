"""`mt plot`: draw the tables of mt/commands/plot_data.py with matplotlib, an optional extra (pip install 'mt[plot]').

Each figure has a fixed size in inches, so an image is that size times --dpi in pixels (1000 x 600 for the
positions at dpi 100). Drawing uses the Agg backend (no display needed) unless a window is asked for.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from mt.decoding.model_backend import load_model_translator
from mt.errors import MtError
from mt.atomic_files import atomic_write
from mt.commands.plot_data import attention_maps, mask_tables, positions_table, select_heads, training_curves

FIGSIZE = {  # inches
    "positions": (10, 6),
    "mask": (6, 6),  # one panel; with --padding two panels side by side
    "attention": (15, 5.5),  # three panels; with --all-heads 3.5 inches per head, 10.5 high
    "curves": (15, 4.5),
}
FORMATS = (".png", ".svg")


def plot_positions(n_positions: int, d_model: int, *, output, show: bool, dpi: int) -> None:
    plt = _pyplot(output, show)
    table = positions_table(n_positions, d_model)
    fig, ax = plt.subplots(figsize=FIGSIZE["positions"], layout="constrained")
    image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    fig.colorbar(image, ax=ax, label="PE(pos, i)")
    ax.set(xlabel="embedding dimension i (even: sin, odd: cos)", ylabel="position pos",
           title=f"Sinusoidal position encodings (section 3.5): {n_positions} positions x {d_model} dimensions")
    _finish(plt, fig, output, show, dpi)


def plot_mask(size: int, padding: int, *, output, show: bool, dpi: int) -> None:
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    plt = _pyplot(output, show)
    tables = mask_tables(size, padding)
    width, height = FIGSIZE["mask"]
    fig, axes = plt.subplots(1, len(tables), figsize=(width * len(tables), height), layout="constrained",
                             squeeze=False)
    colours = ListedColormap(["#eeeeee", "#1f4e79"])  # False: blocked, True: may attend
    titles = {"subsequent": f"subsequent_mask({size})",
              "target": f"target_mask: {size - padding} tokens + {padding} padding\n(padding AND subsequent)"}
    for ax, (name, table) in zip(axes[0], tables.items()):
        ax.imshow(table.astype(int), cmap=colours, vmin=0, vmax=1, interpolation="nearest")
        ticks = range(0, size, 1 if size <= 30 else 5)
        ax.set_xticks(ticks)
        ax.set_yticks(ticks)
        ax.set_xticks(np.arange(-0.5, size, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, size, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=1)
        ax.grid(which="major", visible=False)
        ax.tick_params(which="minor", length=0)
        ax.set(xlabel="key position", ylabel="query position", title=titles[name])
    fig.legend(handles=[Patch(color="#1f4e79", label="True: may attend"),
                        Patch(facecolor="#eeeeee", edgecolor="#999999", label="False: blocked")],
               loc="outside lower center", ncols=2)
    _finish(plt, fig, output, show, dpi)


def plot_attention(checkpoint, text: str, target: str | None, layer: int | None, head: int | None,
                   all_heads: bool, *, output, show: bool, dpi: int) -> None:
    if all_heads and head is not None:
        raise MtError("give --head H or --all-heads, not both")
    plt = _pyplot(output, show)
    maps = attention_maps(load_model_translator(checkpoint, "cpu"), text, target)
    n_layers, n_heads = len(maps.encoder), maps.encoder[0].shape[0]
    layer = n_layers - 1 if layer is None else layer
    chosen = select_heads(maps, layer, head)  # {"encoder", "decoder", "cross"}: (heads, query, key)
    if all_heads:
        labels = [f"head {h}" for h in range(n_heads)]
    elif head is not None:
        labels = [f"head {head}"]
    else:  # one picture per attention: the mean of the heads (its rows still sum to 1)
        chosen = {name: w.mean(axis=0, keepdims=True) for name, w in chosen.items()}
        labels = [f"mean of {n_heads} heads"]
    rows, columns = (3, n_heads) if all_heads else (1, 3)
    figsize = (3.5 * n_heads, 10.5) if all_heads else FIGSIZE["attention"]
    fig, axes = plt.subplots(rows, columns, figsize=figsize, layout="constrained", squeeze=False)
    cells = axes.reshape(3, len(labels))  # a row of cells per attention, a column per head shown
    panels = [("encoder", "encoder self-attention", maps.src_pieces, maps.src_pieces),
              ("decoder", "decoder self-attention", maps.tgt_pieces, maps.tgt_pieces),
              ("cross", "cross-attention", maps.tgt_pieces, maps.src_pieces)]
    for p, (name, title, queries, keys) in enumerate(panels):
        for h, label in enumerate(labels):
            image = _attention_panel(cells[p, h], chosen[name][h], queries, keys, f"{title}, {label}")
    # One scale from 0 to 1 for every panel, so a spread-out row looks dark and a sharp one bright.
    fig.colorbar(image, ax=axes, shrink=0.8, label="attention weight")
    fig.suptitle(f"{checkpoint}, layer {layer} (of 0 to {n_layers - 1})")
    _finish(plt, fig, output, show, dpi)


def _attention_panel(ax, weights: np.ndarray, queries: list[str], keys: list[str], title: str):
    image = ax.imshow(weights, cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
    size = 8 if max(len(queries), len(keys)) <= 30 else 5
    ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=size)
    ax.set_yticks(range(len(queries)), queries, fontsize=size)
    ax.set_xlabel("key", fontsize=9)
    ax.set_ylabel("query", fontsize=9)
    ax.set_title(title, fontsize=10)
    return image


def plot_curves(run_dirs: list, *, output, show: bool, dpi: int) -> None:
    plt = _pyplot(output, show)
    runs = training_curves(run_dirs)
    fig, (loss_ax, bleu_ax, lr_ax) = plt.subplots(1, 3, figsize=FIGSIZE["curves"], layout="constrained")
    for (name, curves), colour in zip(runs.items(), _colours(len(runs))):
        train, dev = curves.get("train", {}), curves.get("dev", {})
        # Dev loss is the NLL (no label smoothing), so the train curve shown beside it is the NLL too.
        if "nll" in train:
            loss_ax.plot(train["step"], train["nll"], color=colour, label=f"{name} train")
        if "loss" in dev:
            loss_ax.plot(dev["step"], dev["loss"], "--o", color=colour, markersize=3, label=f"{name} dev")
        if "bleu" in dev:
            bleu_ax.plot(dev["step"], dev["bleu"], "-o", color=colour, markersize=3, label=name)
        if "lr" in train:
            lr_ax.plot(train["step"], train["lr"], color=colour, label=name)
    loss_ax.set(xlabel="step", ylabel="NLL per target token", title="train and dev loss")
    bleu_ax.set(xlabel="step", ylabel="BLEU", title="dev BLEU (greedy)")
    bleu_ax.set_ylim(bottom=0)
    lr_ax.set(xlabel="step", ylabel="learning rate", title="learning rate")
    for ax in (loss_ax, bleu_ax, lr_ax):
        ax.grid(alpha=0.3)
        if ax.has_data():
            ax.legend(fontsize=8)
    _finish(plt, fig, output, show, dpi)


def _colours(n: int) -> list:
    import matplotlib

    cycle = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]
    return [cycle[i % len(cycle)] for i in range(n)]


def _pyplot(output, show: bool):
    """matplotlib.pyplot on Agg (or on the display's backend with `show`), after checking `output`."""
    if output is None and not show:
        raise MtError("give -o FILE (.png or .svg), or --show")
    if output is not None and Path(output).suffix.lower() not in FORMATS:
        raise MtError(f"{output}: the file name must end in .png or .svg")
    try:
        import matplotlib
    except ImportError:
        raise MtError("mt plot needs matplotlib: pip install 'mt[plot]'") from None
    no_display = MtError("--show needs a display; write a file with -o FILE instead")
    if not show:
        matplotlib.use("Agg")
    elif sys.platform.startswith("linux") and not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        raise no_display  # before matplotlib probes for one (which prints its own complaints)
    import matplotlib.pyplot as plt

    if show and plt.get_backend().lower() in ("agg", "svg", "pdf", "ps", "cairo", "template"):
        raise no_display
    return plt


def _finish(plt, fig, output, show: bool, dpi: int) -> None:
    if output is not None:
        image_format = Path(output).suffix.lstrip(".").lower() or None
        # no bbox_inches="tight": the image keeps the stated size
        atomic_write(Path(output), lambda f: fig.savefig(f, format=image_format, dpi=dpi))
    if show:
        plt.show()
    plt.close(fig)
