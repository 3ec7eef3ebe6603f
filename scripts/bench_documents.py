"""Inline markup in translated HTML: where the tags land, what the markup costs in BLEU, and documents a minute,
for mt serve (whole sentences, tags placed by word alignment: mt/documents/inline_markup.py), the fragment-by-
fragment way (each text run between tags translated alone, as mt did before and Argos does when a tag's text is
not found), and LibreTranslate 1.9.6 on the same model's CTranslate2 export (its `/translate` with format html);
then documents of each format through `/translate_file` of mt serve (the checkpoint, and the CTranslate2 export)
and of LibreTranslate.

Held-out sentences: the dev set's lines with a token that appears once, unchanged, in the source and in the
reference (a number, a name, a command: a word with a digit or a capital letter, or with `-`, `.`, `_`, `/`
inside). Each such line becomes a paragraph `<p>` with that token wrapped in `<b>`; documents hold --paragraphs
paragraphs each. A paragraph's tag is placed right when the output holds `<b>TOKEN</b>` exactly (the check the
issue asks for, automatic where the token is copied). BLEU is of the output with its tags removed against the
references, beside `mt translate`-style plain text of the same lines (format text) from the same server.

    .venv/bin/python scripts/bench_documents.py [--model runs/demo/checkpoint_best.pt] [--lines 883]
        [--paragraphs 20] [--servers mt,fragments,mt-export,libretranslate]
        [--formats html,markdown,docx,pptx,odt,odp,epub,srt]
LibreTranslate is sent the formats it reads (not Markdown).
"""

import argparse
import html
import json
import re
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import sacrebleu

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_serve import ROOT, exported, prepare_lt, start_lt, start_mt  # noqa: E402
import document_files  # noqa: E402
from mt.serving.state import DEFAULT_PARALLEL_BATCHES  # noqa: E402

DATA = ROOT / "data" / "ddtp-de-en"
TOKEN = re.compile(r"^[\w.\-/+]+$")
PLACED = re.compile(r"<b>(.*?)</b>", re.S)


def copied_token(source: str, reference: str) -> str | None:
    """A token found once, as a whole word, in both sides: the first with a digit, a capital, or inner
    punctuation (names, versions, commands)."""
    for word in source.split():
        word = word.strip(".,;:!?()\"'")
        if len(word) < 2 or not TOKEN.match(word):
            continue
        if not (any(c.isdigit() for c in word) or word[0].isupper() or any(c in word[1:-1] for c in "-./_")):
            continue
        pattern = rf"(?<![\w-]){re.escape(word)}(?![\w-])"
        if len(re.findall(pattern, source)) == 1 and len(re.findall(pattern, reference)) == 1:
            return word
    return None


def paragraphs(lines: int) -> list[tuple[str, str, str]]:
    """(source, reference, token) of the dev lines that have a copied token."""
    sources = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:lines]
    references = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:lines]
    found = []
    for source, reference in zip(sources, references):
        token = copied_token(source, reference)
        if token:
            found.append((source, reference, token))
    return found


def marked(source: str, token: str) -> tuple[str, str, str]:
    """The source cut around its token: (before, token, after)."""
    m = re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", source)
    return source[:m.start()], token, source[m.end():]


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(url + "/translate", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)


def html_documents(items, size: int) -> list[list[str]]:
    docs = []
    for i in range(0, len(items), size):
        docs.append([f"<p>{html.escape(b, quote=False)}<b>{html.escape(t, quote=False)}</b>"
                     f"{html.escape(a, quote=False)}</p>" for b, t, a in (marked(s, tok) for s, _, tok in
                                                                          items[i:i + size])])
    return docs


def by_documents(url: str, docs: list[list[str]]) -> list[str]:
    """Each document in one request (format html); its paragraphs back."""
    out = []
    for doc in docs:
        translated = post(url, {"q": "\n".join(doc), "source": "de", "target": "en", "format": "html"})
        out += re.findall(r"<p>(.*?)</p>", translated["translatedText"], re.S)
    return out


def by_fragments(url: str, items) -> list[str]:
    """Each paragraph's three text runs translated alone (format text keeps their surrounding spaces)."""
    out = []
    for source, _, token in items:
        runs = marked(source, token)
        done = iter(post(url, {"q": [r for r in runs if r.strip()], "source": "de", "target": "en"})["translatedText"])
        texts = [next(done) if r.strip() else r for r in runs]
        out.append(f"{html.escape(texts[0], quote=False)}<b>{html.escape(texts[1], quote=False)}</b>"
                   f"{html.escape(texts[2], quote=False)}")
    return out


def plain(url: str, items, size: int) -> list[str]:
    """The sources without markup, a document's worth a request (format text)."""
    out = []
    for i in range(0, len(items), size):
        out += post(url, {"q": [s for s, _, _ in items[i:i + size]], "source": "de", "target": "en"})["translatedText"]
    return out


def latency_during_a_large_document(name: str, url: str, pages: int, fmt: str = "html") -> dict:
    """Seconds of one-sentence requests (one every 0.5 s) alone, then while a document of `pages` pages (30 dev
    lines each, as paragraphs) is translated by POST /translate_file."""
    import threading

    lines = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()
    document = document_files.build(fmt, [(lines[i % len(lines)], "", "") for i in range(30 * pages)])
    probe = "Ein einfacher Texteditor für die Kommandozeile."

    def one() -> float:
        start = time.perf_counter()
        post(url, {"q": probe, "source": "de", "target": "en"})
        return time.perf_counter() - start

    alone = [one() for _ in range(10)]
    done, took = threading.Event(), {}

    def translate_large():
        start = time.perf_counter()
        translated_file_url(url, "large" + document_files.EXTENSION[fmt], document)
        took["seconds"] = time.perf_counter() - start
        done.set()

    threading.Thread(target=translate_large, daemon=True).start()
    during = []
    while not done.wait(0.5):
        during.append(one())
    ordered = sorted(during) or [float("nan")]
    return {"server": name, "format": fmt, "pages": pages, "sentences": 30 * pages,
            "document_seconds": round(took["seconds"], 1),
            "alone_median_ms": round(1000 * sorted(alone)[len(alone) // 2], 1),
            "during_median_ms": round(1000 * ordered[len(ordered) // 2], 1),
            "during_p90_ms": round(1000 * ordered[int(0.9 * (len(ordered) - 1))], 1), "probes": len(during)}


def translated_file_url(url: str, filename: str, data: bytes) -> str:
    """POST /translate_file (a multipart form, as LibreTranslate's clients send it): the translatedFileUrl."""
    import uuid

    boundary = uuid.uuid4().hex
    head = "".join(f"--{boundary}\r\nContent-Disposition: form-data; name=\"{k}\"\r\n\r\n{v}\r\n"
                   for k, v in (("source", "de"), ("target", "en")))
    body = (f"{head}--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\n"
            "Content-Type: application/octet-stream\r\n\r\n").encode() + data + f"\r\n--{boundary}--\r\n".encode()
    request = urllib.request.Request(url + "/translate_file", data=body,
                                     headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
    with urllib.request.urlopen(request, timeout=3600) as response:
        return json.load(response)["translatedFileUrl"]


def upload(url: str, filename: str, data: bytes) -> bytes:
    """The file translated through /translate_file, downloaded."""
    with urllib.request.urlopen(translated_file_url(url, filename, data), timeout=600) as response:
        return response.read()


def by_files(name: str, url: str, fmt: str, items, size: int, clients: int = 1) -> dict:
    """Each document of `size` paragraphs as a `fmt` file through /translate_file, `clients` documents at a time
    (each client sends its next when its last comes back): placement, BLEU, files/min."""
    from concurrent.futures import ThreadPoolExecutor

    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    files = [document_files.build(fmt, [marked(s, t) for s, _, t in chunk]) for chunk in chunks]
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        translated = list(pool.map(lambda k: upload(url, f"doc{k}{document_files.EXTENSION[fmt]}", files[k]),
                                   range(len(files))))
    seconds, count = time.perf_counter() - start, len(files)
    texts, placed = [], 0
    for chunk, data, out in zip(chunks, files, translated):
        got, ok = document_files.read(fmt, out, [t for _, _, t in chunk], data)
        texts += got[:len(chunk)] + [""] * (len(chunk) - len(got))
        placed += ok
    bleu = sacrebleu.corpus_bleu(texts, [[r for _, r, _ in items]]).score
    name += f", {clients} clients" if clients > 1 else ""
    row = {"server": name, "format": fmt, "paragraphs": len(items), "tags_placed": placed,
           "accuracy": round(100 * placed / len(items), 1), "bleu": round(bleu, 2),
           "documents_per_min": round(60 * count / seconds, 1), "seconds": round(seconds, 1)}
    print(json.dumps(row), flush=True)
    return row


def score(name: str, outputs: list[str], items, seconds: float, documents: int) -> dict:
    placed = sum(f"<b>{html.escape(token, quote=False)}</b>" in out for out, (_, _, token) in zip(outputs, items))
    text = [html.unescape(re.sub(r"<[^>]+>", "", out)) for out in outputs]
    holding = sum(re.search(rf"(?<![\w-]){re.escape(token)}(?![\w-])", t) is not None
                  for t, (_, _, token) in zip(text, items))
    nested = sum(out.count("<b>") == out.count("</b>") == 1 and out.index("<b>") < out.index("</b>")
                 for out in outputs)  # the tag kept once, opened before it closes
    bleu = sacrebleu.corpus_bleu(text, [[r for _, r, _ in items]]).score
    row = {"server": name, "paragraphs": len(items), "tags_placed": placed, "tags_kept_nested": nested,
           "accuracy": round(100 * placed / len(items), 1), "holding_the_token": holding,
           "accuracy_where_held": round(100 * placed / max(holding, 1), 1), "bleu": round(bleu, 2),
           "documents_per_min": round(60 * documents / seconds, 1), "seconds": round(seconds, 1)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "runs" / "demo" / "checkpoint_best.pt"))
    ap.add_argument("--lines", type=int, default=883)
    ap.add_argument("--paragraphs", type=int, default=20)
    ap.add_argument("--servers", default="mt,fragments,mt-export,libretranslate")
    ap.add_argument("--ltvenv", default=str(ROOT / ".venv-lt"))
    ap.add_argument("--formats", default=",".join(document_files.FORMATS),
                    help="formats sent to /translate_file of both servers (none: skip)")
    ap.add_argument("--large-pages", type=int, default=100,
                    help="one-sentence latency while a document of this many pages (30 dev lines a page) translates")
    ap.add_argument("--clients", type=int, default=1, help="documents sent to /translate_file at a time")
    ap.add_argument("--large-format", default="html", choices=document_files.FORMATS,
                    help="the large document's format")
    args = ap.parse_args()
    items = paragraphs(args.lines)
    docs = html_documents(items, args.paragraphs)
    servers = args.servers.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-documents-"))
    rows = []
    proc, url = start_mt(args.model, ("de", "en"), True, "cpu", work)
    try:
        start = time.perf_counter()
        references = plain(url, items, args.paragraphs)
        rows.append(score("mt, plain text (no markup)", references, items, time.perf_counter() - start, len(docs)))
        if "mt" in servers:
            start = time.perf_counter()
            rows.append(score("mt serve, format html", by_documents(url, docs), items, time.perf_counter() - start,
                              len(docs)))
        formats = [f for f in args.formats.split(",") if f and f != "none"]
        file_rows = [by_files("mt serve", url, fmt, items, args.paragraphs, args.clients) for fmt in formats]
        if args.large_pages:
            print(json.dumps(latency_during_a_large_document("mt serve", url, args.large_pages, args.large_format)),
                  flush=True)
        if "fragments" in servers:
            start = time.perf_counter()
            rows.append(score("fragment by fragment (mt serve, format text)", by_fragments(url, items), items,
                              time.perf_counter() - start, len(docs)))
    finally:
        proc.stop()
    if "mt-export" in servers and formats:  # mt serve of the CTranslate2 export LibreTranslate is given below
        # One client's document on every thread (--parallel-batches 1); several clients' at the default.
        proc, url = start_mt(str(exported(args.model, work)), ("de", "en"), True, "cpu", work, name="mt-export",
                             parallel_batches=1 if args.clients == 1 else DEFAULT_PARALLEL_BATCHES)
        try:
            file_rows += [by_files("mt serve, CTranslate2 export", url, fmt, items, args.paragraphs, args.clients)
                          for fmt in formats]
        finally:
            proc.stop()
    if "mt-export" in servers and args.large_pages:  # at mt serve's default, two calls at once
        proc, url = start_mt(str(exported(args.model, work)), ("de", "en"), True, "cpu", work, name="mt-export",
                             parallel_batches=DEFAULT_PARALLEL_BATCHES)
        try:
            print(json.dumps(latency_during_a_large_document("mt serve, CTranslate2 export", url,
                                                             args.large_pages, args.large_format)), flush=True)
        finally:
            proc.stop()
    if "libretranslate" in servers:
        launcher = prepare_lt(args.model, ("de", "en"), Path(args.ltvenv), "cpu", work)
        proc, url = start_lt(launcher, ("de", "en"), Path(args.ltvenv), "cpu", work, None, "0")
        try:
            start = time.perf_counter()
            rows.append(score("LibreTranslate 1.9.6, format html", by_documents(url, docs), items,
                              time.perf_counter() - start, len(docs)))
            file_rows += [by_files("LibreTranslate 1.9.6", url, fmt, items, args.paragraphs, args.clients)
                          for fmt in formats if fmt in document_files.LIBRETRANSLATE]
        finally:
            proc.stop()
    print(f"{len(items)} paragraphs with a copied token, from the first {args.lines} dev lines, in {len(docs)} "
          f"documents of {args.paragraphs}")
    print("| server | tags placed right | outputs holding the token | placed right where held | BLEU (tags removed) "
          "| documents/min |\n|---|---:|---:|---:|---:|---:|")
    for row in rows:
        tagged = "no markup" not in row["server"]
        placed = f"{row['tags_placed']}/{row['paragraphs']} ({row['accuracy']}%)" if tagged else "-"
        where = f"{row['accuracy_where_held']}%" if tagged else "-"
        print(f"| {row['server']} | {placed} | {row['holding_the_token']} | {where} | {row['bleu']:.2f} | "
              f"{row['documents_per_min']} |")
    print("\n| format | server | bold around its token | BLEU (text) | documents/min |\n|---|---|---:|---:|---:|")
    for row in sorted(file_rows, key=lambda r: (r["format"], r["server"])):
        print(f"| {row['format']} | {row['server']} | {row['tags_placed']}/{row['paragraphs']} ({row['accuracy']}%) | "
              f"{row['bleu']:.2f} | {row['documents_per_min']} |")


if __name__ == "__main__":
    main()
