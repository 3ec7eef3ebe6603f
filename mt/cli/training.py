"""The commands that make a model: `mt prepare`, `mt clean`, `mt train`, `mt distill`, and `mt bench train`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.cli.path_parameters import clean_outputs, files
from mt.cli.shared import SetOption, warn
from mt.errors import MtError


@files(reads=("config",))
def prepare(config: Path, set_: SetOption = None,
            restart: Annotated[bool, typer.Option(help="Prepare again even if output_dir/data/ is complete.")] = False):
    """Train the sentencepiece model and encode the corpus into output_dir/data/."""
    from mt.config import load_config
    from mt.data.parallel_text import check_sources
    from mt.folder_lock import folder_lock
    from mt.data.prepare import STAMP, data_dir, prepare_data

    cfg = load_config(config, set_ or [])
    check_sources(cfg.data)
    with folder_lock(cfg.output_dir, "mt prepare"):
        complete = (data_dir(cfg) / STAMP).exists() and not restart
        data = prepare_data(cfg, log=warn, force=restart)
    if complete:  # nothing to do: say so, rather than nothing
        warn(f"prepare: {data_dir(cfg)} is complete and up to date ({len(data.train):,} training pairs)")


@files(reads=("src", "tgt", "config"), writes=("output", "report", "rejected"), expand={"output": clean_outputs})
def clean(
    src: Annotated[Path, typer.Option("--src", help="Source side: a UTF-8 text file, one sentence a line; or a file "
                                      "of translations (docs/data.md).")],
    output: Annotated[str, typer.Option("-o", "--output", help="PREFIX: writes PREFIX.SRC_EXT and PREFIX.TGT_EXT "
                                        "(for an input without an extension, a pipe: PREFIX.SRC_LANG).")],
    tgt: Annotated[Optional[Path], typer.Option("--tgt", help="Target side, line-aligned with --src (none for a TMX, "
                                                "PO, XLIFF or .ts file, which holds both).")] = None,
    src_lang: Annotated[Optional[str], typer.Option(help="Source language (default: --src's extension).")] = None,
    tgt_lang: Annotated[Optional[str], typer.Option(help="Target language (default: --tgt's extension).")] = None,
    config: Annotated[Optional[Path], typer.Option(help="A YAML config whose clean section sets the filters.")]
    = None,
    set_: SetOption = None,
    report: Annotated[Optional[Path], typer.Option(help="Also write the report as JSON to this file.")] = None,
    rejected: Annotated[Optional[Path], typer.Option(help="Write each pair removed: line, filter, source, "
                                                     "target (tab-separated).")] = None,
):
    """Remove noisy pairs from a parallel corpus; print how many each filter removed (docs/cleaning.md)."""
    from mt.data.clean import clean_corpus, corpus_languages, file_chunks, output_paths, text_chunks
    from mt.data.translation_memories import PairFile, file_format
    from mt.config import load_config

    cfg = load_config(config, set_ or []).clean
    fmt = file_format(src)
    if fmt == "text":
        if tgt is None:
            raise MtError(f"--src {src}: a text file holds one side; give --tgt too")
        out_src, out_tgt = output_paths(output, src, tgt, src_lang, tgt_lang)
        langs = corpus_languages(src, tgt, src_lang, tgt_lang, cfg)
        chunks = file_chunks(src, tgt)
    else:
        if not (src_lang and tgt_lang):
            raise MtError(f"--src {src}: a {fmt} file is read for two languages; give --src-lang and --tgt-lang")
        out_src, out_tgt = Path(f"{output}.{src_lang}"), Path(f"{output}.{tgt_lang}")
        langs = corpus_languages(out_src, out_tgt, src_lang, tgt_lang, cfg)
        human = PairFile(str(src), None if tgt is None else str(tgt), fmt, src_lang, tgt_lang)
        chunks = text_chunks(human.chunks(shown=str))
    result = clean_corpus(chunks, out_src, out_tgt, cfg, *langs, rejected=rejected,
                          report_path=report, log=warn)
    warn(result.table())
    warn(f"wrote {out_src} and {out_tgt}")


@files(reads=("config",))
def train(config: Path, set_: SetOption = None,
          restart: Annotated[bool, typer.Option(help="Start over even if output_dir has a checkpoint.")] = False):
    """Train a model; resumes from output_dir/checkpoint_last.pt when it exists."""
    from mt.config import load_config
    from mt.training.loop import train as run_training

    cfg = load_config(config, set_ or [])
    result = run_training(cfg, restart=restart)
    if result.stopped_by is not None:  # saved and resumable, but not finished: 128 + the signal, as a shell says
        sys.exit(128 + result.stopped_by)


@files(reads=("config",))
def distill(config: Path, set_: SetOption = None,
            restart: Annotated[bool, typer.Option(help="Start over even if output_dir has a distilled corpus or a "
                                                  "student: what the earlier run made is moved to "
                                                  "output_dir/previous-DATE/, never deleted.")] = False):
    """Distill the teachers of CONFIG's distill section into the student it configures (translate the training
    sources, score and filter, train, export and compare); every step resumes after a kill and is skipped when
    done. See docs/distilling.md."""
    from mt.config import load_config
    from mt.commands.distill import distill as run_distill

    stopped_by = run_distill(load_config(config, set_ or []), warn, restart=restart)
    if stopped_by is not None:  # training stopped by a signal: saved and resumable, as mt train exits
        sys.exit(128 + stopped_by)



bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print numbers (ratios against a reference).")


@bench_app.command("train")
@files(reads=("config",))
def bench_train(config: Path, set_: SetOption = None,
                steps: Annotated[int, typer.Option(min=1, help="Timed updates per side.")] = 50,
                warmup: Annotated[int, typer.Option(min=0, help="Untimed updates per side first.")] = 5,
                compile_: Annotated[bool, typer.Option("--compile", help="torch.compile both sides.")] = False,
                as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False):
    """mt's training step against a plain PyTorch loop of the same size, on the same batches."""
    from mt.training.bench import bench_train as run_bench
    from mt.config import load_config

    overrides = [*(set_ or []), *(["train.compile=true"] if compile_ else [])]
    result = run_bench(load_config(config, overrides), steps=steps, warmup=warmup, log=warn)
    if as_json:
        print(json.dumps(result))
        return
    for side, prefix in (("mt", ""), ("reference", "reference_")):
        print(f"{side:>9}: {result[prefix + 'tokens_per_s']:>10.0f} target tokens/s  "
              f"{result[prefix + 'step_ms']:>8.1f} ms/step  {result[prefix + 'tflops']:.3f} TFLOP/s  "
              f"mfu {result[prefix + 'mfu']:.1%}")
    print(f"    ratio: {result['ratio']:.3f}  host {result['host_ms_per_step']:.2f} ms/step  peak "
          f"{result['peak_tflops']:.2f} TFLOP/s  memory {result['peak_memory_mb']:.0f} MB  "
          f"({result['device']}, {result['precision']}, compile {result['compile']})")
