"""The commands that decode with a model: `mt translate`, `mt evaluate` and `mt score`."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.cli.decode_options import DecodeChoices, with_decode_options
from mt.cli.exit_codes import OutputClosed, exit_without_teardown
from mt.cli.path_parameters import files, memory_paths
from mt.cli.shared import Quiet, RawWeights, SourceLang, TargetLang, check_device, check_quantize, warn
from mt.errors import MtError


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

    check_device(device)
    check_input(input)
    check_quantize(quantize)
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
        translate_document(tr, input, output, opts, document, warn, retranslate, found, quiet)
        exit_without_teardown()
    fmt = LineFormat(nbest, scores, output_format, prefix, constraints, alignment)
    fmt.check(opts)
    try:
        identity = lambda: made_by(checkpoint, opts, fmt, memory=memory, quantize=quantize, raw_weights=raw_weights,
                           chunk_lines=chunk_lines, languages=[source_lang, target_lang])
        translate_file(tr, input, output, opts, fmt, warn, found, identity, restart, quiet, chunk_lines, part)
        exit_without_teardown()
    except BrokenPipeError:  # the reader went away (`| head`); typer would turn it into a silent exit 1
        raise OutputClosed from None



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
    check_device(device)
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
    with open(src, "rb") as source, Progress("evaluate", "translated", total, warn, "lines", quiet=quiet) as progress:
        run_translate(tr, source, sink, decode.applied_to(tr.cfg.decode), LineFormat(), warn, progress=progress)
    if output:
        atomic_write_text(Path(output), sink.getvalue())
    return sink.getvalue().splitlines()



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
    check_device(device)
    check_input(src, "--src")
    check_input(tgt, "--tgt")
    tr = load_translator(checkpoint, device, None, raw_weights).toward(source_lang, target_lang, str(checkpoint[0]))
    run_score(tr, src, tgt, output, alpha=tr.cfg.decode.alpha if alpha is None else alpha, normalize=normalize,
              warn=warn, batch_tokens=batch_tokens, quiet=quiet)
