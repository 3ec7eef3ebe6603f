"""The `mt` command: parse arguments, call one function, print. User errors are one line on stderr.

Set MT_DEBUG=1 (or pass --debug before the command) to see full tracebacks.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.errors import MtError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and run the Transformer of 'Attention Is All You Need'.")

SetOption = Annotated[Optional[list[str]], typer.Option("--set", help="Override a config value: section.key=value")]


def _warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@app.callback()
def _global(debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks.")] = False):
    if debug:
        os.environ["MT_DEBUG"] = "1"


@app.command()
def prepare(config: Path, set_: SetOption = None):
    """Train the sentencepiece model and encode the corpus into output_dir/data/."""
    from mt.config import load_config
    from mt.prepare import prepare_data

    cfg = load_config(config, set_ or [])
    prepare_data(cfg, log=_warn)


@app.command()
def train(config: Path, set_: SetOption = None,
          restart: Annotated[bool, typer.Option(help="Start over even if output_dir has a checkpoint.")] = False):
    """Train a model; resumes from output_dir/checkpoint_last.pt when it exists."""
    from mt.config import load_config
    from mt.train import train as run_training

    cfg = load_config(config, set_ or [])
    run_training(cfg, restart=restart)


@app.command()
def translate(
    checkpoint: Annotated[Path, typer.Option("-c", "--checkpoint", help="Checkpoint to translate with.")],
    input: Annotated[Optional[str], typer.Option("-i", "--input", help="Input file (default: stdin).")] = None,
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="Output file (default: stdout).")] = None,
    beam_size: Annotated[Optional[int], typer.Option(min=1)] = None,
    alpha: Annotated[Optional[float], typer.Option(min=0.0, help="Length penalty exponent.")] = None,
    max_len_a: Annotated[Optional[float], typer.Option(min=0.0)] = None,
    max_len_b: Annotated[Optional[int], typer.Option(min=0)] = None,
    batch_tokens: Annotated[Optional[int], typer.Option(min=1)] = None,
    nbest: Annotated[Optional[int], typer.Option(min=1, help="Write K hypotheses per line: index, score, text.")] = None,
    scores: Annotated[bool, typer.Option(help="Prefix each 1-best line with its score and a tab.")] = False,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
):
    """Translate lines from stdin (or -i) to stdout (or -o); defaults come from the checkpoint's decode section."""
    from mt.translate import decode_options, load_translator, translate_file

    tr = load_translator(checkpoint, device)
    opts = decode_options(tr.cfg.decode, beam_size=beam_size, alpha=alpha, max_len_a=max_len_a,
                          max_len_b=max_len_b, batch_tokens=batch_tokens)
    translate_file(tr, input, output, opts, nbest, scores, _warn)


@app.command()
def evaluate(
    ref: Annotated[Path, typer.Option("--ref", help="Reference translations.")],
    hyp: Annotated[Optional[Path], typer.Option("--hyp", help="Score this file instead of translating.")] = None,
    checkpoint: Annotated[Optional[Path], typer.Option("-c", "--checkpoint")] = None,
    src: Annotated[Optional[str], typer.Option("--src", help="Source file to translate with -c.")] = None,
    metrics: Annotated[str, typer.Option(help="Comma-separated: bleu, chrf, ter.")] = "bleu,chrf",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="Keep the hypotheses here.")] = None,
    beam_size: Annotated[Optional[int], typer.Option(min=1)] = None,
    alpha: Annotated[Optional[float], typer.Option(min=0.0)] = None,
    batch_tokens: Annotated[Optional[int], typer.Option(min=1)] = None,
    device: Annotated[str, typer.Option()] = "auto",
):
    """Score hypotheses against references with sacrebleu (translating --src with -c first if given)."""
    from mt.data import read_lines
    from mt.evaluate import score_corpus

    if (hyp is None) == (checkpoint is None):
        raise MtError("give either --hyp FILE, or -c CHECKPOINT with --src FILE")
    refs = read_lines(ref)
    if hyp is not None:
        hyps = read_lines(hyp)
    else:
        if src is None:
            raise MtError("-c CHECKPOINT needs --src FILE")
        hyps = _translate_for_evaluation(checkpoint, src, output, device, beam_size=beam_size, alpha=alpha,
                                         batch_tokens=batch_tokens)
    if len(hyps) != len(refs):
        raise MtError(f"{hyp or src} has {len(hyps)} lines but {ref} has {len(refs)}")
    result = score_corpus(hyps, refs, [m.strip() for m in metrics.split(",") if m.strip()])
    if as_json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name}\t{value['score']:.2f}\t{value['signature']}")


def _translate_for_evaluation(checkpoint, src, output, device, **overrides) -> list[str]:
    import io

    from mt.translate import decode_options, load_translator, run_translate
    from mt.checkpoint import atomic_write_text

    tr = load_translator(checkpoint, device)
    sink = io.StringIO()
    if not Path(src).is_file():
        raise MtError(f"{src}: no such file")
    with open(src, "rb") as source:
        run_translate(tr, source, sink, decode_options(tr.cfg.decode, **overrides), None, False, _warn)
    if output:
        atomic_write_text(Path(output), sink.getvalue())
    return sink.getvalue().splitlines()


@app.command()
def average(
    checkpoints: Annotated[Optional[list[Path]], typer.Argument(help="Checkpoints to average.")] = None,
    output: Annotated[Path, typer.Option("-o", "--output")] = Path("checkpoint_avg.pt"),
    last: Annotated[Optional[int], typer.Option(help="Average the last N step checkpoints of an output_dir.")] = None,
):
    """Average model parameters (mt average A.pt B.pt -o OUT, or mt average --last 5 OUTPUT_DIR -o OUT)."""
    from mt.checkpoint import average_checkpoints, save_checkpoint, step_checkpoints

    paths = list(checkpoints or [])
    if last is not None:
        if len(paths) != 1 or not paths[0].is_dir():
            raise MtError("--last N takes one OUTPUT_DIR")
        found = step_checkpoints(paths[0])
        if len(found) < last:
            raise MtError(f"{paths[0]}: asked for the last {last} checkpoints, found {len(found)}")
        paths = found[-last:]
    averaged = average_checkpoints(paths)
    save_checkpoint(output, averaged)
    _warn(f"averaged {len(paths)} checkpoints into {output}")


@app.command()
def info(path: Path, set_: SetOption = None):
    """Print the architecture and the exact parameter count of a config or a checkpoint."""
    from mt.info import describe

    print(describe(path, set_ or []))


def main() -> None:
    try:
        app()
    except MtError as e:
        if os.environ.get("MT_DEBUG"):
            raise
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
