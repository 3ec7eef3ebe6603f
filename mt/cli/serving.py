"""The commands of a served model: `mt serve`, `mt adapt` (learning its users' corrections) and `mt suggestions
export`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from mt.cli.path_parameters import files, memory_paths, served_paths
from mt.cli.shared import check_device, check_quantize, warn
from mt.errors import MtError


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

    check_device(device)
    check_quantize(quantize)
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
    run(load_server(specs, settings, warn), settings)



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
                              max_bleu_loss, unreviewed, replay, warn)
    warn(f"wrote {output} (dev BLEU {before:.2f} -> {after:.2f})")


suggestions_app = typer.Typer(no_args_is_help=True, help="Users' corrections that `mt serve --suggestions` kept.")


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

    warn(f"wrote {export(database, output, since)} suggestions to {output}")
