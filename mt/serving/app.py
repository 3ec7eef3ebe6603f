"""`mt serve`: an HTTP server that speaks LibreTranslate's API (so its clients work unchanged), with a per-request
glossary, a native endpoint with every `mt translate` option, Prometheus metrics and a web page.

Every sentence of every request goes to its model's worker (mt/serving/decode_thread.py), which decodes it in one running
batch with the sentences of all other requests. Errors are `{"error": "..."}` with LibreTranslate's status
codes: 400 bad input, 403 a missing or unknown API key, 429 over a key's requests per minute, 503 a full queue
(with Retry-After), 500 a fault of the server (logged, never a traceback in a response).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hmac
import json
import os
import signal
import sys
import threading
import time
import urllib.parse
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData, UploadFile
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from mt.config import DecodeConfig, decode_with
from mt.serving.decode_thread import DecodeWorker, Overloaded, QueueFull, Retired
from mt.serving.detection import detect
from mt.errors import HttpError, MtError
from mt.serving.glossary import glossary_chars, read_glossary, terms_per_sentence
from mt.documents.html import HtmlDocument
from mt.serving.limits import BodyLimit, HttpSettings, guarded_protocol
from mt.decoding.lines import LineFormat, LineText, line_text
from mt.decoding.text_front_end import TextBatch
from mt.serving.fields import bool_field, int_field, request_fields
from mt.documents.document import DocumentTranslation
from mt.documents.formats import read_document
from mt.documents.fragments import Fragments, Rendering
from mt.documents.messages import Localization, MessageText
from mt.documents.model_tags import tags_to_model
from mt.documents.placeholders import WEBLATE_MARKER
from mt.documents.text import TextDocument
from mt.serving.file_jobs import SENTENCES_A_PART, Detached, FileJobs
from mt.serving.translated_files import FILE_EXTENSIONS, KEEP_S, TranslatedFiles, file_format
from mt.serving.state import ServedModel, Server, ServeSettings, reload

WEB_PAGE = Path(__file__).parent / "web" / "index.html"
LANGUAGE_NAMES = {"ar": "Arabic", "cs": "Czech", "da": "Danish", "de": "German", "el": "Greek", "en": "English",
                  "es": "Spanish", "fi": "Finnish", "fr": "French", "hu": "Hungarian", "it": "Italian",
                  "ja": "Japanese", "ko": "Korean", "nl": "Dutch", "pl": "Polish", "pt": "Portuguese",
                  "ro": "Romanian", "ru": "Russian", "sv": "Swedish", "tr": "Turkish", "uk": "Ukrainian",
                  "zh": "Chinese"}
ENDPOINTS = ("/translate", "/languages", "/health", "/ready", "/metrics", "/mt/translate", "/", "/detect",
             "/frontend/settings", "/translate_file", "/download_file", "/suggest", "/translate_file/jobs")
# A document's alignment pass (mt's model) runs on the decode thread in static batches of this many source tokens,
# between decoding steps: a short request decoding meanwhile waits for at most one such batch.
ALIGNMENT_PART_TOKENS = 1024
QUEUE_POLL_S = 0.02  # how often a request waiting for room in a full queue tries again
STOP_AFTER_GRACE_S = 5.0  # after the shutdown grace period, seconds the decoding of closed requests may take
NATIVE_OPTIONS = tuple(f.name for f in dataclasses.fields(DecodeConfig))  # every decode option, by name


# ---------------------------------------------------------------- the access check


def _access_checked(read_fields):
    """LibreTranslate's access check, written once: the endpoint is called as `endpoint(request, fields)` with
    the fields `read_fields(request)` reads, once they hold an allowed `api_key` (with --api-keys: 403 for a
    missing or unknown key, 429 over its requests per minute; without it, every request is let in)."""
    def decorate(endpoint):
        async def checked(request: Request) -> Response:
            fields = await read_fields(request)
            server: Server = request.app.state.server
            if server.api_keys is not None:
                server.api_keys.check(fields.get("api_key"))
            return await endpoint(request, fields)
        return checked
    return decorate


async def _form_fields(request: Request) -> FormData:
    """A multipart form's fields, its files among them; Starlette's limits are a 400."""
    try:
        return await request.form()
    except HTTPException as e:
        raise HttpError(400, f"Invalid request: {e.detail}") from None


# ---------------------------------------------------------------- LibreTranslate's API


@_access_checked(request_fields)
async def translate(request: Request, body: dict) -> JSONResponse:
    server: Server = request.app.state.server
    q = body.get("q")
    if q is None or q == "" or q == []:  # as LibreTranslate: an empty q is a missing one
        raise HttpError(400, "Invalid request: missing q parameter")
    texts = q if isinstance(q, list) else [q]
    if not all(isinstance(t, str) for t in texts):
        raise HttpError(400, "Invalid request: q must be a string or a list of strings")
    limits = server.limits
    glossary = read_glossary(body.get("glossary"), limits.max_glossary_terms, limits.max_term_chars)
    chars = sum(len(t) for t in texts) + glossary_chars(glossary)
    if chars > limits.max_chars:
        raise HttpError(400, f"Invalid request: request ({chars} characters, glossary included) exceeds text limit "
                             f"({limits.max_chars})")
    fmt = body.get("format", "text")
    if fmt not in ("text", "html"):
        raise HttpError(400, f"Invalid request: format must be text or html, got {fmt!r}")
    alternatives = int_field(body, "alternatives", 0, 0, 10)
    protect = bool_field(body, "placeholders")  # mt's own: placeholders kept out of the model's way (messages.py)
    if protect and fmt != "text":
        raise HttpError(400, "Invalid request: placeholders: for format text (html's markup is kept anyway)")
    # Weblate sends no `placeholders` and stands [X7X] in for each of a string's own: those texts are messages
    markers = fmt == "text" and "placeholders" not in body
    detected = await _detected(server, texts, body.get("target")) if body.get("source") == "auto" else None
    if detected and detected["language"] == body.get("target"):  # as LibreTranslate's identity translation
        return JSONResponse(_as_sent(q, detected, alternatives))
    served = server.model(detected["language"] if detected else body.get("source"), body.get("target"))
    with tags_to_model(served.translator.carries_tags):
        documents = await run_in_threadpool(lambda: [_remembered(server, served, t, fmt)
                                                     or _document(t, fmt, protect, markers) for t in texts])
    protecting = fmt == "html" or any(isinstance(d, MessageText) for d in documents)
    sentences = [s for document in documents for s in document.sentences]
    if len(sentences) > server.limits.max_sentences:
        raise HttpError(400, f"Invalid request: {len(sentences)} sentences, more than {server.limits.max_sentences}")
    # HTML's inline markup goes back where the word alignment of each whole sentence puts it.
    found = await _translate_texts(request, served, sentences, alternatives + 1, glossary, alignment=protecting)

    def render(fragments: Fragments | None = None) -> tuple[list[str], list[list[str]], list[bool]]:
        results, alts, kept, at = [], [], [], 0
        for document in documents:
            n = len(document.sentences)
            mine, at = found[at:at + n], at + n
            results.append(document.render([hyps[0] for hyps in mine], fragments))
            kept.append(getattr(document, "kept", True))  # False: a placeholder would not come back
            alts.append([document.render([hyps[min(i, len(hyps) - 1)] for hyps in mine], fragments)
                         for i in range(1, alternatives + 1)])
        return results, alts, kept
    results, alts, kept = await _rendered(request, served, Rendering(render), glossary) if protecting else render()
    answer = {"translatedText": results if isinstance(q, list) else results[0]}
    if protect:  # False: a placeholder would not come back, and the text is answered as sent
        answer["placeholdersKept"] = kept if isinstance(q, list) else kept[0]
    if alternatives:
        answer["alternatives"] = alts if isinstance(q, list) else alts[0]
    if detected:
        answer["detectedLanguage"] = [detected] * len(texts) if isinstance(q, list) else detected
    return JSONResponse(answer)


class Remembered:
    """A text the translation memory holds: nothing to decode, its translation the memory's."""

    sentences: list[str] = []

    def __init__(self, translation: str):
        self.translation = translation

    def render(self, translations, fragments: Fragments | None = None) -> str:
        return self.translation


def _remembered(server: Server, served: ServedModel, text: str, fmt: str) -> Remembered | None:
    """A user's correction of the text (--suggestions), else the translation memory's (--memory)."""
    if fmt != "text":
        return None
    found = server.suggestions.get(served.source, served.target, text) if server.suggestions is not None else None
    if found is None and served.memory is not None:
        found = served.memory.get(text)
    return None if found is None else Remembered(found)


def _document(text: str, fmt: str, protect: bool, markers: bool):
    """How /translate reads one text: HTML, a message whose placeholders are kept (asked for, or a text holding
    Weblate's markers), or plain text."""
    if fmt == "html":
        return HtmlDocument(text)
    return MessageText(text) if protect or (markers and WEBLATE_MARKER.search(text)) else TextDocument(text)


async def _detected(server: Server, texts: list[str], target) -> dict:
    """LibreTranslate's `detectedLanguage` for `source: "auto"`: the most probable of the served source languages
    and the served `target` for the request's texts together (a text already in the target language is answered
    as it is, as LibreTranslate does)."""
    served_target = {target} & {t for _, t in server.models} if isinstance(target, str) else set()
    candidates = {s for s, _ in server.models} | served_target
    found = await run_in_threadpool(detect, "\n".join(texts), candidates)
    if not found:
        raise HttpError(400, "source: auto: none of the served source languages can be detected; give the source "
                             "language code (see /languages)")
    return {"confidence": found[0][1], "language": found[0][0]}


def _as_sent(q, detected: dict, alternatives: int) -> dict:
    """The answer for texts already in the target language: each as it was sent (LibreTranslate's identity
    translation, whose alternatives are all the text itself, so none)."""
    answer = {"translatedText": q, "detectedLanguage": [detected] * len(q) if isinstance(q, list) else detected}
    if alternatives:
        answer["alternatives"] = [[] for _ in q] if isinstance(q, list) else []
    return answer


@_access_checked(request_fields)
async def detect_language(request: Request, body: dict) -> JSONResponse:
    """LibreTranslate's `POST /detect`: `q` -> [{"confidence": 92.0, "language": "de"}, ...], the served source
    languages, most probable first (a list of such lists for a list `q`)."""
    server: Server = request.app.state.server
    q = body.get("q")
    texts = q if isinstance(q, list) else [q]
    if q is None or q == "" or q == [] or not all(isinstance(t, str) for t in texts):
        raise HttpError(400, "Invalid request: missing q parameter (a string or a list of strings)")
    if sum(len(t) for t in texts) > server.limits.max_chars:
        raise HttpError(400, f"Invalid request: request exceeds text limit ({server.limits.max_chars})")
    sources = {s for s, _ in server.models}
    found = await run_in_threadpool(lambda: [[{"confidence": c, "language": code} for code, c in detect(t, sources)]
                                             for t in texts])
    return JSONResponse(found if isinstance(q, list) else found[0])


@_access_checked(request_fields)
async def suggest(request: Request, body: dict) -> JSONResponse:
    """LibreTranslate's `POST /suggest`: a user's translation `s` of `q`, stored (on disk before the 200) and
    answered by every later /translate of `q` in that direction. Unlike LibreTranslate's, it takes the API-key
    check and the character limit of /translate."""
    server: Server = request.app.state.server
    if server.suggestions is None:
        raise HttpError(403, "Suggestions are disabled on this server.")
    for name in ("q", "s", "source", "target"):
        if not body.get(name):
            raise HttpError(400, f"Invalid request: missing {name} parameter")
        if not isinstance(body[name], str):
            raise HttpError(400, f"Invalid request: {name} must be a string")
    chars = len(body["q"]) + len(body["s"])
    if chars > server.limits.max_chars:
        raise HttpError(400, f"Invalid request: request ({chars} characters) exceeds text limit "
                             f"({server.limits.max_chars})")
    served = server.model(body["source"], body["target"])
    await run_in_threadpool(server.suggestions.add, body["q"], body["s"], served.source, served.target,
                            body.get("api_key") or None)
    return JSONResponse({"success": True})


async def frontend_settings(request: Request) -> JSONResponse:
    """LibreTranslate's `GET /frontend/settings`, which its web clients read first."""
    server: Server = request.app.state.server
    keys, target = server.api_keys is not None, sorted(t for _, t in server.models)[0]
    return JSONResponse({"charLimit": server.limits.max_chars, "frontendTimeout": 500, "apiKeys": keys,
                         "keyRequired": keys, "suggestions": server.suggestions is not None,
                         "filesTranslation": True,
                         "supportedFilesFormat": sorted(FILE_EXTENSIONS),
                         "language": {"source": {"code": "auto", "name": "Auto Detect"},
                                      "target": {"code": target, "name": LANGUAGE_NAMES.get(target, target)}}})


@_access_checked(_form_fields)
async def translate_file(request: Request, form: FormData) -> JSONResponse:
    """LibreTranslate's `POST /translate_file`: the document translated in its own format, kept for download
    (mt/serving/translated_files.py); with `background=true`, a job answered at once (mt/serving/file_jobs.py)."""
    server: Server = request.app.state.server
    upload = form.get("file")
    if not isinstance(upload, UploadFile) or not upload.filename:
        raise HttpError(400, "Invalid request: missing file parameter (a multipart file)")
    fmt = file_format(upload.filename)
    if fmt is None:
        raise HttpError(400, f"Invalid request: {upload.filename}: mt translates "
                             f"{', '.join(sorted(FILE_EXTENSIONS))} files")
    source, target = form.get("source"), form.get("target")
    served = None if source == "auto" else server.model(source, target)
    data = await upload.read()
    base = str(request.base_url).rstrip("/")
    if not bool_field(form, "background"):
        name, notes = await _translated_upload(request, served, data, fmt, upload.filename, source, target)
        return JSONResponse({"translatedFileUrl": f"{base}/download_file/{urllib.parse.quote(name)}", "notes": notes})

    async def work(job) -> str:
        name, job.notes = await _translated_upload(Detached(request.app, job), served, data, fmt, upload.filename,
                                                   source, target, job)
        return f"{base}/download_file/{urllib.parse.quote(name)}"

    job = request.app.state.jobs.start(work)
    return JSONResponse({"jobId": job.id, "statusUrl": f"{base}/translate_file/jobs/{job.id}"}, status_code=202)


async def _translated_upload(request, served: ServedModel | None, data: bytes, fmt: str, filename: str,
                             source: str, target: str, job=None) -> tuple[str, list[str]]:
    """An uploaded document translated and kept: its download name, and the notes of what its format left for
    review (mt/documents/document.py `Rendered`). A background `job` hears how many of its sentences are done, a
    part at a time."""
    server: Server = request.app.state.server
    auto = source == "auto"
    memory = served.memory if served is not None else None  # with source auto the direction is not known yet

    async def read(tags: bool):
        with tags_to_model(tags):
            return await run_in_threadpool(read_document, data, fmt, Path(filename),
                                           Localization(target, memory=memory))
    document = await read(served is not None and served.translator.carries_tags)
    if auto:  # the language of the file's sentences, as LibreTranslate detects it
        source = (await _detected(server, document.sentences, target))["language"]
    if auto and source == target:  # already in the target language: the file as it came
        translated, notes = data, []
    else:
        if served is None and (served := server.model(source, target)).translator.carries_tags:
            document = await read(True)  # read again for a model that carries inline markup as tags
        translation = DocumentTranslation(document, SENTENCES_A_PART if job is not None else len(document.sentences))
        if job is not None:
            job.total = len(document.sentences)
        for part in translation.parts:  # a part decodes as it would alone, beside the others
            translation.add([per[0] for per in await _translate_texts(request, served, part, 1, {}, alignment=True)])
            if job is not None:
                job.done = len(translation.found)
        rendered = await _rendered(request, served, translation, {})
        translated, notes = rendered.data, rendered.notes
    return await run_in_threadpool(request.app.state.files.keep, translated, filename), notes


async def file_job(request: Request) -> JSONResponse:
    """`GET /translate_file/jobs/ID`: a background document's status, progress and, once done, its file's URL;
    `DELETE`: cancel it."""
    jobs = request.app.state.jobs
    job_id = request.path_params["job_id"]
    job = jobs.cancel(job_id) if request.method == "DELETE" else jobs.get(job_id)
    return JSONResponse(job.answer())


async def download_file(request: Request) -> Response:
    """LibreTranslate's `GET /download_file/NAME`: a translated file, under the name it was uploaded with."""
    name = request.path_params["name"]
    path = request.app.state.files.path(name)
    if path is None:
        raise HttpError(404, f"no translated file {name!r} (files are kept {KEEP_S / 60:.0f} minutes)")
    return FileResponse(path, filename=name.split(".", 1)[1])


async def _rendered(request: Request, served: ServedModel, rendering: Rendering, glossary: dict[str, str]):
    """The rendering's steps (mt/documents/fragments.py) off the event loop: once to find the words of lost inline
    elements to translate alone, then for good."""
    words = await run_in_threadpool(rendering.words)
    alone = await _translate_texts(request, served, words, 1, glossary) if words else []
    return await run_in_threadpool(rendering.rendered, [hyps[0][0] for hyps in alone])


async def _translate_texts(request: Request, served: ServedModel, sentences: list[str], nbest: int,
                           glossary: dict[str, str], alignment: bool = False) -> list[list[tuple[str, str | None]]]:
    """Each sentence's `nbest` translations (text, and its word alignment when asked for), through the model's
    worker; a sentence containing a glossary's source term must contain its target term (constrained beam
    search). The glossary is matched off the event loop."""
    terms = await run_in_threadpool(terms_per_sentence, sentences, glossary) if glossary else [()] * len(sentences)
    lines = [LineText(s.strip(), i, terms=t) for i, (s, t) in enumerate(zip(sentences, terms))]
    hyps, _ = await _decode(request, served, lines, served.translator.cfg.decode, nbest, alignment)
    return [[(t.text, t.alignment) for t in per] for per in hyps]


async def _decode(request: Request, served: ServedModel, lines: list[LineText], opts, nbest: int,
                  alignment: bool = False):
    """Translations of `lines` (mt.decoding.lines.Translation per hypothesis) through the text front end `mt translate`
    uses (mt/decoding/text_front_end.py `TextBatch`), decoded by the worker beside every other request's sentences,
    and the pieces each line was cut into (1 for a line that fits the model); a client that disconnects releases
    its sentences. The alignment pass runs on the decode thread, which alone runs torch."""
    server: Server = request.app.state.server
    tr = served.translator
    if server.log_text:  # asked for with --log-text; by default the log holds sizes, never text
        print(f"mt serve: text {json.dumps([line.source for line in lines], ensure_ascii=False)}", file=sys.stderr,
              flush=True)
    while True:
        batch = await run_in_threadpool(lambda: TextBatch(tr, lines, opts, nbest=nbest, alignment=alignment))
        try:
            job = await _queued(request, served.worker, batch.todo, server.limits.queue_wait_s)
            break
        except Retired:  # a reload swapped the model while the lines were cut into pieces: the new one takes them
            served = server.models[(served.source, served.target)]
            tr = served.translator
    found = await _wait_or_release(request, served.worker, job)
    hyps = batch.hypotheses(found)
    if alignment:  # on the decode thread, a static batch at a time between decoding steps (an export has none:
        # its search kept the attention)
        for part in batch.attention_parts(hyps, ALIGNMENT_PART_TOKENS):
            await asyncio.wrap_future(server.decoder.submit(part))
    server.metrics.sentences.inc(len(batch.todo))
    server.metrics.tokens.inc(sum(len(h[0].tokens) for h in hyps if h))
    return await run_in_threadpool(batch.translations, hyps), batch.counts


async def _queued(request: Request, worker: DecodeWorker, requests: list, wait_s: float):
    """The worker's job of these sentences. A full queue is waited on for up to `wait_s` seconds before the 503:
    LibreTranslate's server holds a request it cannot start yet, and a client such as Weblate turns the service
    off for 30 minutes on a 503 (docs/serving.md)."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            return worker.submit(requests)
        except QueueFull as e:
            if time.monotonic() >= deadline:
                raise HttpError(503, str(e), {"Retry-After": "1"}) from None
        except Overloaded as e:
            raise HttpError(503, str(e), {"Retry-After": "1"}) from None
        if await request.is_disconnected():
            raise HttpError(499, "client closed the request")
        await asyncio.sleep(QUEUE_POLL_S)


async def _wait_or_release(request: Request, worker: DecodeWorker, job):
    """The job's hypotheses; a client that disconnects, or a shutdown past its grace period, releases them."""
    waiting = asyncio.wrap_future(job.done)
    try:
        while True:
            done, _ = await asyncio.wait({waiting}, timeout=0.25)
            if done:
                return waiting.result()
            if await request.is_disconnected():
                worker.cancel(job)
                raise HttpError(499, "client closed the request")
    except asyncio.CancelledError:
        worker.cancel(job)
        raise


async def languages(request: Request) -> JSONResponse:
    """LibreTranslate's `GET /languages`: every language the server translates from or into, each with the
    targets it translates into (none for a language served only as a target). Weblate, Discourse and Nextcloud
    keep the codes alone and offer a direction when both of its languages are listed."""
    server: Server = request.app.state.server
    codes = sorted({lang for pair in server.models for lang in pair})
    return JSONResponse([{"code": c, "name": LANGUAGE_NAMES.get(c, c),
                          "targets": sorted(t for s, t in server.models if s == c)} for c in codes])


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"status": "ok"})


async def ready(request: Request) -> JSONResponse:
    if not request.app.state.server.ready:
        raise HttpError(503, "loading models")
    return JSONResponse({"status": "ready"})


async def metrics(request: Request) -> Response:
    token = request.app.state.server.metrics_token
    if token is not None:  # as LibreTranslate's --metrics-auth-token
        given = request.headers.get("authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
            raise HttpError(401, "Unauthorized: /metrics needs Authorization: Bearer TOKEN",
                            {"WWW-Authenticate": "Bearer"})
    return Response(generate_latest(request.app.state.server.metrics.registry), media_type=CONTENT_TYPE_LATEST)


async def web_page(request: Request) -> Response:
    if not WEB_PAGE.is_file():
        raise HttpError(404, "no web page in this installation")
    return FileResponse(WEB_PAGE, media_type="text/html")


# ---------------------------------------------------------------- the native endpoint


def request_decode_options(body: dict, defaults: DecodeConfig) -> DecodeConfig:
    """The native endpoint's decode options: every DecodeConfig field, by its name, over the model's defaults."""
    return decode_with(defaults, [], {name: body.get(name) for name in NATIVE_OPTIONS}, "request")


@_access_checked(request_fields)
async def native_translate(request: Request, body: dict) -> JSONResponse:
    """`mt translate`'s options as JSON fields: {"source", "target", "lines": [...], "beam_size", "nbest",
    "sampling", "seed", ..., "scores", "prefix", "constraints", "alignment"} -> {"results": [what
    `--output-format json` writes for each line]}."""
    server: Server = request.app.state.server
    lines = body.get("lines")
    if not isinstance(lines, list) or not lines or not all(isinstance(line, str) for line in lines):
        raise HttpError(400, "Invalid request: lines must be a non-empty list of strings")
    if len(lines) > server.limits.max_sentences:
        raise HttpError(400, f"Invalid request: {len(lines)} lines, more than {server.limits.max_sentences}")
    if sum(len(line) for line in lines) > server.limits.max_chars:
        raise HttpError(400, f"Invalid request: lines exceed the text limit ({server.limits.max_chars})")
    served = server.model(body.get("source"), body.get("target"))
    nbest = int_field(body, "nbest", 1, 1, 100)
    flags = {name: bool_field(body, name) for name in ("prefix", "constraints", "alignment")}
    opts = request_decode_options(body, served.translator.cfg.decode)
    fmt = LineFormat(nbest, False, "json", flags["prefix"], flags["constraints"], flags["alignment"])
    fmt.check(opts)
    texts = [line_text(line, i, fmt) for i, line in enumerate(lines)]
    plain = not (flags["prefix"] or flags["constraints"])
    remembered = [_remembered(server, served, line, "text") if plain else None for line in lines]
    asked = [text for text, known in zip(texts, remembered) if known is None]
    decoded, pieces = await _decode(request, served, asked, opts, nbest, flags["alignment"]) if asked else ([], [])
    decoded, pieces = iter(decoded), iter(pieces)
    results = []
    for i, known in enumerate(remembered):
        if known is not None:  # a user's correction or the memory's: not decoded
            results.append({"line": i, "hypotheses": [{"text": known.translation, "score": 0.0, "memory": True}]})
            continue
        per, n = next(decoded), next(pieces)
        results.append({"line": i, "hypotheses": [{"text": t.text, "score": round(t.score, 4),
                                                   **({"alignment": t.alignment} if t.alignment is not None else {})}
                                                  for t in per], **({"split_into": n} if n > 1 else {})})
    return JSONResponse({"results": results})


# ---------------------------------------------------------------- requests and errors


def _route(handler, endpoint: str):
    """`handler` with one log line per request (no text unless asked), metrics and JSON errors."""
    async def run(request: Request) -> Response:
        server: Server = request.app.state.server
        start = time.perf_counter()
        try:
            with server.metrics.in_progress.labels(endpoint).track_inprogress():
                response = await handler(request)
        except HttpError as e:
            response = JSONResponse({"error": e.message}, status_code=e.status, headers=e.headers)
        except ClientDisconnect:  # left before its body was in: counted as 499, nothing to answer
            response = JSONResponse({"error": "client closed the request"}, status_code=499)
        except asyncio.CancelledError:  # uvicorn cancels what is left when the shutdown grace period is over
            server.closed_unanswered += 1
            response = JSONResponse({"error": "the server is shutting down"}, status_code=503,
                                    headers={"Connection": "close"})
        except MtError as e:  # an option rule or value the request broke (mt's one-line errors)
            response = JSONResponse({"error": f"Invalid request: {e}"}, status_code=400)
        except Exception as e:  # a fault of the server: logged, a one-line 500 for the client
            print(f"mt serve: error in {endpoint}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            response = JSONResponse({"error": "internal server error"}, status_code=500)
        seconds = time.perf_counter() - start
        server.metrics.requests.labels(endpoint, str(response.status_code)).inc()
        server.metrics.latency.labels(endpoint).observe(seconds)
        if endpoint not in ("/metrics", "/health", "/ready"):
            print(f"mt serve: {request.method} {endpoint} {response.status_code} {seconds * 1000:.0f} ms",
                  file=sys.stderr, flush=True)
        return response
    return run


def create_app(server: Server, http: HttpSettings | None = None) -> Starlette:
    routes = [Route("/translate", _route(translate, "/translate"), methods=["POST"]),
              Route("/languages", _route(languages, "/languages"), methods=["GET", "POST"]),
              Route("/health", _route(health, "/health"), methods=["GET"]),
              Route("/ready", _route(ready, "/ready"), methods=["GET"]),
              Route("/metrics", _route(metrics, "/metrics"), methods=["GET"]),
              Route("/mt/translate", _route(native_translate, "/mt/translate"), methods=["POST"]),
              Route("/detect", _route(detect_language, "/detect"), methods=["POST"]),
              Route("/frontend/settings", _route(frontend_settings, "/frontend/settings"), methods=["GET"]),
              Route("/translate_file", _route(translate_file, "/translate_file"), methods=["POST"]),
              Route("/download_file/{name}", _route(download_file, "/download_file"), methods=["GET"]),
              Route("/translate_file/jobs/{job_id}", _route(file_job, "/translate_file/jobs"),
                    methods=["GET", "DELETE"]),
              Route("/suggest", _route(suggest, "/suggest"), methods=["POST"]),
              Route("/", _route(web_page, "/"), methods=["GET"])]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _routing_error})
    http = http or HttpSettings()
    app.state.server, app.state.files, app.state.jobs = server, TranslatedFiles(), FileJobs(http.max_file_jobs)

    def rejected(path: str, status: int) -> None:
        server.metrics.requests.labels(path if path in ENDPOINTS else "other", str(status)).inc()
    app.add_middleware(BodyLimit, max_body_bytes=http.body_limit(server.limits.max_chars),
                       read_timeout=http.read_timeout, rejected=rejected,
                       larger={"/translate_file": http.max_file_bytes})
    if origins := http.allowed_origins():  # as LibreTranslate: any origin by default; outermost, so errors carry it
        app.add_middleware(CORSMiddleware, allow_origins=origins, allow_methods=["GET", "POST", "DELETE"],
                           allow_headers=["*"])
    return app


async def _routing_error(request: Request, error: HTTPException) -> JSONResponse:
    """An unknown path (404) or method (405), as JSON like every other error."""
    return JSONResponse({"error": f"{request.method} {request.url.path}: {error.detail}"},
                        status_code=error.status_code, headers=error.headers)


# ---------------------------------------------------------------- running it


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def serve(server: Server, settings: ServeSettings) -> None:
    """Serve until SIGTERM or Ctrl-C: then stop accepting, answer what was accepted, stop the workers."""
    import uvicorn

    class ReadyLine(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self):
            """SIGTERM and Ctrl-C start the graceful shutdown; unlike uvicorn's own, the signal is not raised
            again after it, so a server that answered everything it accepted exits 0."""
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            # SIGHUP: the models loaded again from their paths, beside the running ones, and swapped in
            previous[signal.SIGHUP] = signal.signal(signal.SIGHUP, lambda *_: threading.Thread(
                target=reload, args=(server, _log), name="mt-reload", daemon=True).start())
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        async def shutdown(self, sockets=None):
            # background documents are no request uvicorn waits for: failed now, their sentences released
            self.config.app.state.jobs.fail_running("the server is shutting down")
            await super().shutdown(sockets)

        async def startup(self, sockets=None):
            await super().startup(sockets)
            if self.started:
                port = self.servers[0].sockets[0].getsockname()[1] if self.servers else settings.port
                print(f"mt serve: ready at http://{settings.host}:{port}", file=sys.stderr, flush=True)

    http = settings.http
    config = uvicorn.Config(create_app(server, http), host=settings.host, port=settings.port, log_level="warning",
                            access_log=False, lifespan="off", http=guarded_protocol(http.read_timeout),
                            timeout_keep_alive=http.keep_alive_timeout, timeout_graceful_shutdown=http.shutdown_grace)
    try:
        ReadyLine(config).run()
    finally:
        _stop_decoding(server)


def _stop_decoding(server: Server) -> None:
    """Let the decode thread finish what it accepted; after a shutdown that closed requests past its grace
    period, at most a few seconds more (what they had decoding is dropped with the process), and exit 1."""
    if not server.closed_unanswered:
        server.decoder.stop()
        return
    print(f"mt serve: shutdown grace period over: closed {server.closed_unanswered} request(s) with 503",
          file=sys.stderr, flush=True)
    stopping = threading.Thread(target=server.decoder.stop, daemon=True)
    stopping.start()
    stopping.join(timeout=STOP_AFTER_GRACE_S)
    os._exit(1)
