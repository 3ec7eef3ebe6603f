"""The `mt` command: parse arguments, call one function, print. User errors are one line on stderr.

Set MT_DEBUG=1 (or pass --debug before the command) to see full tracebacks.
"""

from __future__ import annotations

import io
import json
import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.decode_options import DecodeChoices, with_decode_options
from mt.errors import MtError
from mt.exit_codes import OutputClosed, exit_without_teardown, run_and_exit
from mt.path_parameters import clean_outputs, comma_separated, files, memory_paths, metrics_files, served_paths
from mt.tuning import describe, tune_process

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Train and run the Transformer of 'Attention Is All You Need'.")

SetOption = Annotated[Optional[list[str]], typer.Option("--set", help="Override a config value: section.key=value")]
SourceLang = Annotated[Optional[str], typer.Option("--source-lang", help="A multilingual model's source language "
                                                   "code (checked against the directions it knows).")]
TargetLang = Annotated[Optional[str], typer.Option("--target-lang", help="A multilingual model's target language "
                                                   "code (`mt info` lists its directions).")]
RawWeights = Annotated[bool, typer.Option("--raw-weights", help="A checkpoint's last-update weights, not its "
                                          "moving average (train.ema_decay).")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No progress on stderr.")]


_tuning: dict[str, str] = {}  # what main()'s tune_process set, shown by --debug


def _warn(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@app.callback()
def _global(debug: Annotated[bool, typer.Option("--debug", help="Show full tracebacks and the process tuning.")]
            = False):
    if debug:
        os.environ["MT_DEBUG"] = "1"
        _warn(describe(_tuning))


@app.command()
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
        data = prepare_data(cfg, log=_warn, force=restart)
    if complete:  # nothing to do: say so, rather than nothing
        _warn(f"prepare: {data_dir(cfg)} is complete and up to date ({len(data.train):,} training pairs)")


@app.command()
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
                          report_path=report, log=_warn)
    _warn(result.table())
    _warn(f"wrote {out_src} and {out_tgt}")


@app.command()
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


@app.command()
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

    stopped_by = run_distill(load_config(config, set_ or []), _warn, restart=restart)
    if stopped_by is not None:  # training stopped by a signal: saved and resumable, as mt train exits
        sys.exit(128 + stopped_by)


@app.command()
@files(reads=("checkpoint", "input", "memory"), writes=("output",), expand={"memory": memory_paths},
       seeks=("checkpoint", "memory"))
@with_decode_options
def translate(
    checkpoint: Annotated[list[Path], typer.Option("-c", "--checkpoint", help="Checkpoint to translate with; "
                                                   "several: an ensemble.")],
    input: Annotated[Optional[str], typer.Option("-i", "--input", help="Input file (default: stdin).")] = None,
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="Output file (default: stdout).")] = None,
    nbest: Annotated[Optional[int], typer.Option(min=1, help="Write K hypotheses per line: index, score, text.")] = None,
    scores: Annotated[bool, typer.Option(help="Prefix each 1-best line with its score and a tab.")] = False,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    quantize: Annotated[Optional[str], typer.Option(help="int8: int8 weights (mt: CPU only).")] = None,
    raw_weights: RawWeights = False,
    output_format: Annotated[str, typer.Option(help="text, or json: one object per input line.")] = "text",
    prefix: Annotated[bool, typer.Option("--prefix", help="Input lines are source<TAB>target prefix; each output "
                                         "starts with its prefix.")] = False,
    alignment: Annotated[bool, typer.Option("--alignment", help="Add <TAB> and Moses word alignments i-j.")] = False,
    constraints: Annotated[bool, typer.Option("--constraints", help="Input lines are source<TAB>term<TAB>term...; "
                                              "every term appears in the output.")] = False,
    input_format: Annotated[str, typer.Option(help="auto (a document by -i's extension: .html .htm .xhtml .md "
                                              ".markdown .srt .vtt .docx .pptx .odt .odp .epub .pdf .po .pot .xlf "
                                              ".xliff .ts .xml .json .arb .properties; else lines), lines, text, "
                                              "html, markdown, srt, vtt, docx, pptx, odt, odp, epub, pdf, po, xliff, "
                                              "ts, android, json or properties.")] = "auto",
    retranslate: Annotated[bool, typer.Option("--retranslate", help="A localization file with translations (.po, "
                                              ".xlf, .ts): translate the entries already translated too.")] = False,
    placeholders: Annotated[bool, typer.Option("--placeholders", help="Line input: keep placeholders (%s, {0}, "
                                               "$HOME, tags) out of the model's way and put them back.")] = False,
    memory: Annotated[Optional[list[str]], typer.Option("--memory", help="Line input: a translation memory (TMX, "
                                                        "PO, XLIFF, .ts, or SRC,TGT files) whose exact matches are "
                                                        "answered instead of the model's; repeatable.")] = None,
    restart: Annotated[bool, typer.Option("--restart", help="-i FILE -o FILE: start over instead of resuming an "
                                          "interrupted run.")] = False,
    quiet: Quiet = False,
    chunk_lines: Annotated[int, typer.Option(min=1, help="Lines translated and, with -i FILE -o FILE, written to "
                                             "disk at a time.")] = 2000,
    shard: Annotated[Optional[str], typer.Option(help="I/N: translate the I-th of N parts of -i (from 0) into -o; "
                                                 "`cat` joins the parts (docs/translating.md).")] = None,
    source_lang: SourceLang = None,
    target_lang: TargetLang = None,
    decode: DecodeChoices = None,
):
    """Translate lines from stdin (or -i) to stdout (or -o), or a document (--input-format) into one of its
    format; defaults come from the checkpoint's decode section. From -i FILE to -o FILE, an interrupted run is
    resumed by the same command (docs/translating.md); stdin and stdout cannot be.

    CHECKPOINT may also be a directory written by `mt export`: CTranslate2 then decodes.
    """
    from mt.decoding.loading import load_translator
    from mt.commands.translate import OUTPUT_FORMATS, made_by, translate_file
    from mt.commands.translate_document import check_output_format, document_format, translate_document
    from mt.documents.formats import BILINGUAL, LOCALIZATION
    from mt.path_checks import check_input
    from mt.decoding.lines import LineFormat

    _check_device(device)
    check_input(input)
    _check_quantize(quantize)
    check_output_format(output, input, input_format)
    if output_format not in OUTPUT_FORMATS:
        raise MtError(f"--output-format: one of {', '.join(OUTPUT_FORMATS)}, got '{output_format}'")
    document = document_format(input, input_format, placeholders)
    if retranslate and document not in BILINGUAL:
        raise MtError(f"--retranslate: for localization files that hold translations ({', '.join(BILINGUAL)}); the "
                      f"input is read as {document or 'lines'}")
    if document is not None:
        line_options = {"--nbest": nbest is not None, "--scores": scores, "--output-format": output_format != "text",
                        "--prefix": prefix, "--constraints": constraints, "--alignment": alignment}
        given = next((option for option, value in line_options.items() if value), None)
        if given:
            raise MtError(f"{given}: not with --placeholders" if placeholders else f"{given}: for line input only; "
                          f"the input is read as {document} (--input-format lines reads it as lines)")
    if memory and document is not None and document not in LOCALIZATION:
        raise MtError(f"--memory: for line input and localization files; the input is read as {document}")
    from mt.commands.shards import parse_shard, use_rank_gpu

    part = parse_shard(shard) if shard is not None else None
    if part is not None and document is not None:
        raise MtError(f"--shard: for line input; the input is read as {document}")
    use_rank_gpu(device)
    tr = load_translator(checkpoint, device, quantize, raw_weights).toward(source_lang, target_lang, str(checkpoint[0]))
    opts = decode.applied_to(tr.cfg.decode)
    from mt.data.translation_memories import read_memory

    found = read_memory(memory, source_lang or tr.cfg.data.src_lang, target_lang or tr.cfg.data.tgt_lang)
    if document is not None:
        translate_document(tr, input, output, opts, document, _warn, retranslate, found, quiet)
        exit_without_teardown()
    fmt = LineFormat(nbest, scores, output_format, prefix, constraints, alignment)
    fmt.check(opts)
    try:
        identity = lambda: made_by(checkpoint, opts, fmt, memory=memory, quantize=quantize, raw_weights=raw_weights,
                           chunk_lines=chunk_lines, languages=[source_lang, target_lang])
        translate_file(tr, input, output, opts, fmt, _warn, found, identity, restart, quiet, chunk_lines, part)
        exit_without_teardown()
    except BrokenPipeError:  # the reader went away (`| head`); typer would turn it into a silent exit 1
        raise OutputClosed from None


def _checkpoint_inputs(checkpoints: list[Path]) -> dict[str, Path]:
    """The checkpoints a command reads, keyed by how an error names them (`-c PATH`), for check_output."""
    return {f"-c{'' if len(checkpoints) == 1 else f' #{i + 1}'}": path for i, path in enumerate(checkpoints)}


def _check_device(device: str) -> None:
    """Before any work: a device name mt does not know is a one-line error."""
    from mt.runtime import check_device_name

    check_device_name(device, "--device")


@app.command()
@files(reads=("ref", "hyp", "checkpoint", "src"), writes=("output",), seeks=("checkpoint",))
@with_decode_options
def evaluate(
    ref: Annotated[Path, typer.Option("--ref", help="Reference translations.")],
    hyp: Annotated[Optional[Path], typer.Option("--hyp", help="Score this file instead of translating.")] = None,
    checkpoint: Annotated[Optional[list[Path]], typer.Option("-c", "--checkpoint", help="Several: an ensemble.")] = None,
    src: Annotated[Optional[str], typer.Option("--src", help="Source file to translate with -c.")] = None,
    metrics: Annotated[str, typer.Option(help="Comma-separated: bleu, chrf, ter.")] = "bleu,chrf",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="Keep the hypotheses here.")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    raw_weights: RawWeights = False,
    quiet: Quiet = False,
    source_lang: SourceLang = None,
    target_lang: TargetLang = None,
    decode: DecodeChoices = None,
):
    """Score hypotheses against references with sacrebleu (translating --src with -c first if given)."""
    from mt.data.text_files import read_lines
    from mt.training.corpus_scores import score_corpus

    from mt.path_checks import check_input

    if (hyp is None) == (checkpoint is None):
        raise MtError("give either --hyp FILE, or -c CHECKPOINT with --src FILE")
    if checkpoint is not None and src is None:
        raise MtError("-c CHECKPOINT needs --src FILE")
    _check_device(device)
    for path, option in ((ref, "--ref"), (hyp, "--hyp"), (src, "--src")):
        check_input(None if path is None else str(path), option)
    refs = read_lines(ref)
    if not refs:
        raise MtError(f"--ref {ref}: empty file, nothing to score")
    if hyp is not None:
        hyps = read_lines(hyp)
    else:
        hyps = _translate_for_evaluation(checkpoint, src, output, device, raw_weights, decode,
                                         (source_lang, target_lang), quiet)
    if len(hyps) != len(refs):
        raise MtError(f"{hyp or src} has {len(hyps)} lines but {ref} has {len(refs)}")
    result = score_corpus(hyps, refs, [m.strip() for m in metrics.split(",") if m.strip()])
    if as_json:
        print(json.dumps(result))
    else:
        for name, value in result.items():
            print(f"{name}\t{value['score']:.2f}\t{value['signature']}")


def _translate_for_evaluation(checkpoint, src, output, device, raw_weights, decode: DecodeChoices,
                              languages: tuple[str | None, str | None], quiet: bool) -> list[str]:
    from mt.atomic_files import atomic_write_text, is_special
    from mt.commands.translate import run_translate
    from mt.decoding.lines import LineFormat
    from mt.decoding.loading import load_translator
    from mt.decoding.scoring import count_lines
    from mt.progress import Progress

    tr = load_translator(checkpoint, device, raw_weights=raw_weights).toward(*languages, str(checkpoint[0]))
    sink = io.StringIO()
    total = None if is_special(Path(src)) else count_lines(src)
    with open(src, "rb") as source, Progress("evaluate", "translated", total, _warn, "lines", quiet=quiet) as progress:
        run_translate(tr, source, sink, decode.applied_to(tr.cfg.decode), LineFormat(), _warn, progress=progress)
    if output:
        atomic_write_text(Path(output), sink.getvalue())
    return sink.getvalue().splitlines()


@app.command()
@files(reads=("checkpoint", "src", "tgt"), writes=("output",), seeks=("checkpoint",))
def score(
    checkpoint: Annotated[list[Path], typer.Option("-c", "--checkpoint", help="Checkpoint (several: an ensemble) "
                                                   "or exported directory to score with.")],
    src: Annotated[str, typer.Option("--src", help="Source sentences, one per line.")],
    tgt: Annotated[str, typer.Option("--tgt", help="Their translations, line-aligned with --src.")],
    output: Annotated[Optional[str], typer.Option("-o", "--output", help="Output file (default: stdout).")] = None,
    normalize: Annotated[bool, typer.Option("--normalize", help="Divide by the length penalty, as the scores of "
                                            "mt translate --scores (default: the plain log-probability).")] = False,
    alpha: Annotated[Optional[float], typer.Option(help="Length penalty exponent for --normalize (default: the "
                                                   "model's decode.alpha).")] = None,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    batch_tokens: Annotated[Optional[int], typer.Option(min=1, help="Tokens per teacher-forced batch (the wider "
                                                        "side of each pair, padding counted; default 2048).")] = None,
    raw_weights: RawWeights = False,
    quiet: Quiet = False,
    source_lang: SourceLang = None,
    target_lang: TargetLang = None,
):
    """Write each pair's log-probability under the model (teacher forcing), one line per pair, in order."""
    from mt.decoding.scoring import run_score
    from mt.path_checks import check_input
    from mt.decoding.loading import load_translator

    if alpha is not None and not normalize:
        raise MtError("--alpha: the length penalty applies only with --normalize (the plain log-probability has "
                      "none); add --normalize or leave --alpha out")
    _check_device(device)
    check_input(src, "--src")
    check_input(tgt, "--tgt")
    tr = load_translator(checkpoint, device, None, raw_weights).toward(source_lang, target_lang, str(checkpoint[0]))
    run_score(tr, src, tgt, output, alpha=tr.cfg.decode.alpha if alpha is None else alpha, normalize=normalize,
              warn=_warn, batch_tokens=batch_tokens, quiet=quiet)


@app.command()
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
    _warn(f"averaged {len(paths)} checkpoint{'s' if len(paths) > 1 else ''} into {output}")


@app.command()
@files(reads=("model", "api_keys", "memory", "suggestions"), expand={"model": served_paths, "memory": memory_paths},
       seeks=("model", "memory", "suggestions"))  # read again by SIGHUP; suggestions: SQLite's database
def serve(
    model: Annotated[list[str], typer.Option("-m", "--model", help="SRC:TGT=PATH: a checkpoint, a CTranslate2 export "
                                             "(mt export), or A.pt,B.pt (an ensemble); repeat for more pairs. PATH "
                                             "alone: every direction of a multilingual model.")],
    host: Annotated[str, typer.Option(help="Address to listen on (0.0.0.0: every interface).")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="0: any free port (the ready line says which).")] = 5000,
    device: Annotated[str, typer.Option(help="auto, cpu or cuda.")] = "auto",
    api_keys: Annotated[Optional[str], typer.Option(help="File of `KEY [REQUESTS_PER_MINUTE]` lines: requests "
                                                    "need one of the keys (api_key).")] = None,
    max_chars: Annotated[int, typer.Option(min=1, help="Characters per request.")] = 20_000,
    max_sentences: Annotated[int, typer.Option(min=1, help="Sentences (native: lines) per request.")] = 500,
    max_queued_tokens: Annotated[int, typer.Option(min=1, help="Source tokens queued per model; more wait for "
                                                   "room.")] = 100_000,
    queue_wait: Annotated[float, typer.Option(min=0, help="Seconds a request waits for room in a full queue; "
                                              "then 503.")] = 10.0,
    batching: Annotated[bool, typer.Option(help="Decode the sentences of concurrent requests together (off: one "
                                           "request at a time).")] = True,
    log_text: Annotated[bool, typer.Option("--log-text", help="Log request texts (off: sizes only).")] = False,
    threads: Annotated[int, typer.Option(min=0, help="CPU threads a model decodes with (torch's and CTranslate2's); "
                                         "0: torch's default (the cores).")] = 0,
    parallel_batches: Annotated[Optional[int], typer.Option(min=1, help="Exported models on a CPU: batches "
                                "CTranslate2 decodes at once, each on threads / N threads (default 2, at most "
                                "the threads).")] = None,
    quantize: Annotated[Optional[str], typer.Option(help="int8: int8 weights (checkpoints: CPU only; exports: "
                                                    "CTranslate2's int8, what LibreTranslate decodes with).")] = None,
    max_body_bytes: Annotated[Optional[int], typer.Option(min=1, help="Bytes of a request body; more: 413 "
                                                          "(default: 12 per --max-chars character + 64 KiB).")] = None,
    max_file_bytes: Annotated[Optional[int], typer.Option(min=1, help="Bytes of a file upload to /translate_file; "
                                                          "more: 413 (default: 20 MiB).")] = None,
    max_file_jobs: Annotated[Optional[int], typer.Option(min=1, help="Background documents (/translate_file "
                                                         "background=true) at once; more: 429 (default: 4).")] = None,
    read_timeout: Annotated[Optional[float], typer.Option(min=0.1, help="Seconds a request may take to arrive "
                                                          "whole, from its first byte; more: 408.")] = None,
    keep_alive_timeout: Annotated[Optional[float], typer.Option(min=0.1, help="Seconds an idle connection is "
                                                                "kept open for its next request.")] = None,
    shutdown_grace: Annotated[Optional[float], typer.Option(min=0, help="Seconds SIGTERM waits for requests in "
                                                            "progress; then they are closed and mt exits 1.")] = None,
    cors_origins: Annotated[Optional[str], typer.Option(help="Origins whose web pages may call the API: *, a "
                                                        "comma-separated list, or none.")] = None,
    metrics_auth_token: Annotated[Optional[str], typer.Option(envvar="MT_METRICS_AUTH_TOKEN", help="/metrics needs "
                                                              "`Authorization: Bearer TOKEN`.")] = None,
    memory: Annotated[Optional[list[str]], typer.Option("--memory", help="[SRC:TGT=]FILE[,FILE]: a translation "
                                                        "memory whose exact matches /translate answers; repeatable.")]
    = None,
    suggestions: Annotated[Optional[Path], typer.Option("--suggestions", help="SQLite file for POST /suggest "
                                                        "(made if missing); corrections are answered at once.")]
    = None,
):
    """Serve models over HTTP: LibreTranslate's API, a glossary per request, a native endpoint, /metrics, a web page."""
    try:
        from mt.serving.limits import HttpSettings
        from mt.serving.state import Limits, ModelSpec, ServeSettings, load_server
        from mt.serving.app import serve as run
    except ModuleNotFoundError as e:  # the extra mt[serve] (pyproject.toml), or uvicorn's own h11
        missing = (e.name or "").partition(".")[0]
        if missing not in ("starlette", "uvicorn", "h11", "prometheus_client"):
            raise
        raise MtError(f"mt serve needs {missing}: pip install 'mt[serve]'") from None

    _check_device(device)
    _check_quantize(quantize)
    _check_port(host, port)
    specs = [ModelSpec.parse(text) for text in model]
    given = {"max_body_bytes": max_body_bytes, "max_file_bytes": max_file_bytes, "max_file_jobs": max_file_jobs,
             "read_timeout": read_timeout,
             "keep_alive_timeout": keep_alive_timeout, "shutdown_grace": shutdown_grace, "cors_origins": cors_origins,
             "metrics_token": metrics_auth_token}
    http = HttpSettings(**{name: value for name, value in given.items() if value is not None})
    settings = ServeSettings(host, port, device, Limits(max_chars, max_sentences, max_queued_tokens,
                                                        queue_wait_s=queue_wait), api_keys,
                             batching, log_text, threads, parallel_batches, http, quantize, tuple(memory or ()),
                             str(suggestions) if suggestions else None)
    run(load_server(specs, settings, _warn), settings)


def _check_quantize(quantize: str | None) -> None:
    if quantize not in (None, "int8"):
        raise MtError(f"--quantize: only int8 is supported, got '{quantize}'")


def _check_port(host: str, port: int) -> None:
    """Before loading any model: the address can be listened on (as uvicorn will, reusing a closing one)."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind((host, port))
    except OSError as e:
        raise MtError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None


@app.command()
@files(reads=("checkpoint", "corrections", "dev_src", "dev_ref", "replay_src", "replay_tgt"), writes=("output",),
       seeks=("checkpoint", "corrections", "dev_src", "dev_ref", "replay_src", "replay_tgt"))  # read again by others
def adapt(
    checkpoint: Annotated[Path, typer.Option("-c", "--checkpoint", help="The model to adapt (an mt checkpoint).")],
    corrections: Annotated[Path, typer.Option(help="Reviewed corrections as TMX (mt suggestions export), or the "
                                              "suggestions database with --unreviewed.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The adapted checkpoint to write.")],
    dev_src: Annotated[Path, typer.Option("--dev-src", help="Dev set source: the model must not get worse on it.")],
    dev_ref: Annotated[Path, typer.Option("--dev-ref", help="Dev set references.")],
    src_lang: Annotated[str, typer.Option(help="The corrections' source language (as in the TMX).")],
    tgt_lang: Annotated[str, typer.Option(help="Their target language.")],
    steps: Annotated[int, typer.Option(min=1, help="Fine-tuning updates.")] = 200,
    weight: Annotated[float, typer.Option(min=0.01, help="The corrections' share of the batches against the "
                                          "replay's 1.")] = 1.0,
    max_bleu_loss: Annotated[float, typer.Option(min=0, help="Refuse a model that loses more dev BLEU.")] = 0.5,
    unreviewed: Annotated[bool, typer.Option("--unreviewed", help="Adapt straight from the suggestions database "
                                             "(what anyone sent).")] = False,
    replay_src: Annotated[Optional[Path], typer.Option(help="Replay this corpus instead of the model's own "
                                                       "training data.")] = None,
    replay_tgt: Annotated[Optional[Path], typer.Option(help="Its target side.")] = None,
):
    """Fine-tune a model on users' corrections mixed with a replay of its training data; write it only if it does
    not lose more than --max-bleu-loss on the dev set (docs/serving.md)."""
    from mt.commands.adapt import adapt as run_adapt

    if (replay_src is None) != (replay_tgt is None):
        raise MtError("--replay-src and --replay-tgt go together")
    replay = (replay_src, replay_tgt) if replay_src else None
    before, after = run_adapt(checkpoint, corrections, output, dev_src, dev_ref, (src_lang, tgt_lang), steps, weight,
                              max_bleu_loss, unreviewed, replay, _warn)
    _warn(f"wrote {output} (dev BLEU {before:.2f} -> {after:.2f})")


suggestions_app = typer.Typer(no_args_is_help=True, help="Users' corrections that `mt serve --suggestions` kept.")
app.add_typer(suggestions_app, name="suggestions")


@suggestions_app.command("export")
@files(reads=("database",), writes=("output",), seeks=("database",))
def suggestions_export(
    database: Annotated[Path, typer.Argument(help="The --suggestions file of `mt serve`.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="The TMX file to write.")],
    since: Annotated[Optional[str], typer.Option(help="Only those made at or after this date or time (UTC unless "
                                                 "it says): 2026-12-01, 2026-12-01T09:30.")] = None,
):
    """Write the suggestions as TMX 1.4 (each unit's creationdate and id kept), for review, mt train or a CAT tool."""
    from mt.serving.suggestions import export

    _warn(f"wrote {export(database, output, since)} suggestions to {output}")


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print numbers (ratios against a reference).")
app.add_typer(bench_app, name="bench")


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
    result = run_bench(load_config(config, overrides), steps=steps, warmup=warmup, log=_warn)
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


@app.command()
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
                 sentence_splitter=sentence_splitter, log=_warn)


@app.command("import")
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

    cfg = import_model(source, output, log=_warn)
    _warn(f"imported {source} into {output}; to fine-tune it (train.init_from), a config needs these sections:")
    sections = {k: v for k, v in config_to_dict(cfg).items() if k in ("tokenizer", "model")}
    if cfg.languages.token != "none":  # and each corpus' src_lang and tgt_lang (docs/multilingual.md)
        sections["languages"] = {"token": cfg.languages.token}
    print(yaml.safe_dump(sections, sort_keys=False), end="")


@app.command()
@files(reads=("path",))
def info(path: Path, set_: SetOption = None):
    """Print the architecture and the exact parameter count of a config or a checkpoint."""
    from mt.commands.info import describe

    print(describe(path, set_ or []))


plot_app = typer.Typer(no_args_is_help=True, help="Draw the model: positions, masks, attention, training curves.")
app.add_typer(plot_app, name="plot")
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
        _warn(f"wrote {output}")


def main() -> None:
    """`mt`: the process tuned first, then the command, which ends with an exit code of mt/exit_codes.py."""
    _tuning.update(tune_process(sys.argv[1:]))  # before any command imports torch (mt/tuning.py)
    run_and_exit(app)
