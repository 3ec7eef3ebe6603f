"""Placeholders and markup in localization files: how many come back, whether the written file is valid, and what
they cost in BLEU, for `mt translate` of a PO file (placeholders kept out of the model's way: mt/documents/) and
for the same strings sent as plain lines (what a client that sends each string as text gets), and for LibreTranslate
serving the same model (exported and packed as an Argos package, as scripts/bench_serve.py does) with each string
sent to its POST /translate as Weblate sends them (`format` text, LibreTranslate's default) and with `format` html
(its markup-keeping mode).

Held-out pairs: the first --lines lines of the shipped dev set (data/ddtp-de-en/dev.*; the model never trained on
them). Each source gets one placeholder or piece of markup, cycling through KINDS, inserted before a word at a
known place (the middle of the line); every fifth entry is a plural entry (`%d` before its middle word, the
singular the same text with `1`). A placeholder is kept when the msgstr holds each of its source's exactly as
often; a file is valid when GNU gettext's `msgfmt --check --use-fuzzy` passes and polib reads it. BLEU is
sacrebleu's, of the msgstr (the plural's msgstr[1]) with its placeholders removed and white space made single,
against the reference; an entry left empty (a translation that would have lost a placeholder) counts as an empty
output. The rows of translated strings (plain lines, LibreTranslate) are written into a copy of the PO file
(flagged fuzzy, the plural's forms from its singular and plural msgid) for the same file checks.

With --resource-files, the singular entries' strings (those whose dev sentence has no `&<>\\`) also go into a
JSON, a Java .properties, an Android strings.xml and a Qt .ts file, each translated with `mt translate -i` and
read back with translate-toolkit; "left empty" counts there the strings left in the source language (or, in the
.ts file, left empty) because a placeholder would not come back.

    .venv/bin/python scripts/bench_localization.py --model runs/demo/checkpoint_best.pt [--lines 500]
        [--ltvenv .venv-lt | --ltvenv none] [--resource-files]
"""

import argparse
import html
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import polib
import sacrebleu
from translate.storage import aresource, jsonl10n, properties, ts2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
from bench_serve import prepare_lt, start_lt  # noqa: E402
from mt.documents.placeholders import placeholders  # noqa: E402

DATA = ROOT / "data" / "ddtp-de-en"
KINDS = ["%s", "%d", "%1$s", "%(name)s", "{0}", "{name}", "{{ var }}", "$HOME", "${x}", "<b>{word}</b>", "&amp;",
         "<br/>"]
FLAGS = {"%s": "c-format", "%d": "c-format", "%1$s": "c-format", "%(name)s": "python-format"}  # msgfmt checks these


def inserted(source: str, kind: str) -> str:
    """`source` with `kind` before its middle word (a `<b>` pair around that word)."""
    words = source.split()
    middle = len(words) // 2
    if "{word}" in kind:
        words[middle] = kind.format(word=words[middle])
    else:
        words.insert(middle, kind)
    return " ".join(words)


def entries(lines: int) -> list[tuple[polib.POEntry, str, str]]:
    """(entry, plain source, reference) for the first `lines` dev pairs with four words or more."""
    sources = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:lines]
    references = (DATA / "dev.en").read_text(encoding="utf-8").splitlines()[:lines]
    out = []
    for i, (source, reference) in enumerate(zip(sources, references)):
        if len(source.split()) < 4:
            continue
        if i % 5 == 4:
            plural = inserted(source, "%d")
            entry = polib.POEntry(msgid=inserted(source, "1"), msgid_plural=plural, msgstr_plural={0: "", 1: ""},
                                  flags=["c-format"], occurrences=[("dev.de", str(i + 1))])
        else:
            kind = KINDS[i % len(KINDS)]
            entry = polib.POEntry(msgid=inserted(source, kind), msgstr="", flags=[FLAGS[kind]] if kind in FLAGS else [],
                                  occurrences=[("dev.de", str(i + 1))])
        out.append((entry, source, reference))
    return out


def po_file(found: list[tuple[polib.POEntry, str, str]]) -> polib.POFile:
    catalog = polib.POFile()
    catalog.metadata = {"Project-Id-Version": "bench", "Language": "en", "MIME-Version": "1.0",
                        "Content-Type": "text/plain; charset=UTF-8", "Content-Transfer-Encoding": "8bit",
                        "Plural-Forms": "nplurals=2; plural=(n != 1);"}
    for entry, _, _ in found:
        catalog.append(entry)
    return catalog


def bare(text: str) -> str:
    for placeholder in sorted(set(placeholders(text)), key=len, reverse=True):
        text = text.replace(placeholder, " ")
    return " ".join(text.split())


def scores(sources: list[str], outputs: list[str], references: list[str]) -> dict:
    kept = sum(Counter(placeholders(s)) == Counter(placeholders(o)) for s, o in zip(sources, outputs) if o)
    marks = sum(len(placeholders(s)) for s in sources)
    found = sum(min(Counter(placeholders(s))[p], Counter(placeholders(o))[p])
                for s, o in zip(sources, outputs) for p in set(placeholders(s)))
    bleu = sacrebleu.corpus_bleu([bare(o) for o in outputs], [references]).score
    return {"entries kept whole": f"{kept}/{len(sources)}", "placeholders back": f"{found}/{marks}",
            "left empty": sum(1 for o in outputs if not o), "BLEU": f"{bleu:.1f}"}


def filled(found: list[tuple[polib.POEntry, str, str]], translated: dict[str, str], path: Path) -> list[str]:
    """The PO file with each msgstr the translation of its msgid (a plural's forms: of its msgid and its
    msgid_plural), flagged fuzzy, saved to `path`; the outputs to score (the plural's msgstr[1])."""
    catalog, outputs = po_file([]), []
    for entry, _, _ in found:
        copy = polib.POEntry(msgid=entry.msgid, msgid_plural=entry.msgid_plural, flags=[*entry.flags, "fuzzy"],
                             occurrences=entry.occurrences)
        if entry.msgid_plural:
            copy.msgstr_plural = {0: translated[entry.msgid], 1: translated[entry.msgid_plural]}
        else:
            copy.msgstr = translated[entry.msgid]
        catalog.append(copy)
        outputs.append(translated[entry.msgid_plural or entry.msgid])
    catalog.save(str(path))
    return outputs


def file_checks(path: Path) -> str:
    """"yes" when GNU gettext's msgfmt --check passes (--use-fuzzy: the entries filled are checked too) and polib
    reads the file, else how many entries msgfmt found broken (its "found N fatal errors")."""
    check = subprocess.run(["msgfmt", "--check", "--use-fuzzy", "-o", "/dev/null", str(path)],
                           capture_output=True, text=True)
    polib.pofile(str(path))
    if check.returncode == 0:
        return "yes"
    found = re.search(r"found (\d+) fatal error", check.stderr)
    return f"no: {found.group(1) if found else '?'} entries broken"


def libretranslate(model: str, ltvenv: Path, strings: list[str], work: Path) -> dict[str, tuple[list[str], float]]:
    """`strings` through LibreTranslate serving `model`, 32 to a request, per `format`: the translations and the
    seconds they took."""
    launcher = prepare_lt(model, ("de", "en"), ltvenv, "cpu", work)
    server, url = start_lt(launcher, ("de", "en"), ltvenv, "cpu", work, None, "0")
    out = {}
    try:
        for fmt in ("text", "html"):
            start, translations = time.perf_counter(), []
            for i in range(0, len(strings), 32):
                response = httpx.post(url + "/translate", timeout=600, json={
                    "q": strings[i:i + 32], "source": "de", "target": "en", "format": fmt})
                response.raise_for_status()
                translations += response.json()["translatedText"]
            out[fmt] = translations, time.perf_counter() - start
    finally:
        server.stop()
    return out


def resource_files(found: list[tuple[polib.POEntry, str, str]], model: str, work: Path) -> dict[str, dict]:
    """The singular entries' strings (those whose dev sentence has no `&<>\\`, which each format escapes its own
    way) in a JSON, a Java .properties, an Android strings.xml and a Qt .ts file, each translated with
    `mt translate -i` and read back with translate-toolkit: a row each."""
    chosen = [(e.msgid, r) for e, source, r in found if not e.msgid_plural and not re.search(r"[&<>\\]", source)]
    strings, references = [s for s, _ in chosen], [r for _, r in chosen]
    android = [s.replace("\\", "\\\\").replace("'", "\\'").replace('"', '\\"') for s in strings]
    files = {
        "json": json.dumps({f"s{i}": s for i, s in enumerate(strings)}, ensure_ascii=False, indent=2),
        "properties": "".join(f"s{i} = {s}\n" for i, s in enumerate(strings)),
        "xml": "<resources>\n" + "".join(f'  <string name="s{i}">{s}</string>\n' for i, s in enumerate(android))
               + "</resources>\n",
        "ts": '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE TS>\n<TS version="2.1" language="en" '
              'sourcelanguage="de">\n<context>\n  <name>bench</name>\n' + "".join(
                  f'  <message>\n    <source>{html.escape(s, quote=False)}</source>\n    <translation '
                  'type="unfinished"></translation>\n  </message>\n' for s in strings) + "</context>\n</TS>\n",
    }
    readers = {"json": jsonl10n.JsonFile, "properties": properties.propfile, "xml": aresource.AndroidResourceFile,
               "ts": ts2.tsfile}
    rows = {}
    for ext, text in files.items():
        (work / f"bench.{ext}").write_text(text, encoding="utf-8")
        proc, seconds = mt("translate", "-c", model, "-i", work / f"bench.{ext}", "-o", work / f"out.{ext}")
        read = readers[ext].parsestring((work / f"bench.{ext}").read_bytes()).units
        written = readers[ext].parsestring((work / f"out.{ext}").read_bytes()).units
        sources = [u.source for u in read if u.getid() or ext == "ts"]
        outputs = [(u.target if ext == "ts" else u.source) for u in written if u.getid() or ext == "ts"]
        assert len(sources) == len(outputs) == len(strings), (ext, len(sources), len(outputs), len(strings))
        left = sum(o == s or not o for s, o in zip(sources, outputs))  # kept in the source language, or empty
        rows[f"`mt translate -i bench.{ext}`"] = {**scores(sources, outputs, references), "left empty": left,
                                                  "valid file": "yes", "seconds": f"{seconds:.1f}"}
    return rows


def mt(*args, input: str | None = None) -> tuple[subprocess.CompletedProcess, float]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mt", *map(str, args)], cwd=ROOT, input=input, text=True,
                          capture_output=True, check=True)
    return proc, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / "runs" / "demo" / "checkpoint_best.pt"))
    parser.add_argument("--lines", type=int, default=500)
    parser.add_argument("--ltvenv", default=str(ROOT / ".venv-lt"), help="LibreTranslate's virtualenv, or none")
    parser.add_argument("--resource-files", action="store_true", help="also the singular strings in JSON, "
                        ".properties, Android and Qt files")
    args = parser.parse_args()
    found = entries(args.lines)
    sources = [e.msgid_plural or e.msgid for e, _, _ in found]
    strings = list(dict.fromkeys(s for e, _, _ in found for s in (e.msgid, e.msgid_plural) if s))
    references = [r for _, _, r in found]
    rows = {}
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        po_in, po_out = work / "bench.po", work / "out.po"
        po_file(found).save(str(po_in))
        proc, seconds = mt("translate", "-c", args.model, "-i", po_in, "-o", po_out)
        written = polib.pofile(str(po_out))
        outputs = [e.msgstr_plural.get(1, "") if e.msgid_plural else e.msgstr for e in written]
        rows["mt translate -i bench.po"] = {**scores(sources, outputs, references), "valid file": file_checks(po_out),
                                            "seconds": f"{seconds:.1f}"}
        notes = [line for line in proc.stderr.splitlines() if line.startswith("note:")]
        proc, seconds = mt("translate", "-c", args.model, input="\n".join(strings) + "\n")
        outputs = filled(found, dict(zip(strings, proc.stdout.splitlines())), work / "lines.po")
        rows["mt translate, the strings as plain lines"] = {
            **scores(sources, outputs, references), "valid file": file_checks(work / "lines.po"),
            "seconds": f"{seconds:.1f}"}
        if args.ltvenv != "none":
            for fmt, (translations, seconds) in libretranslate(args.model, Path(args.ltvenv), strings, work).items():
                outputs = filled(found, dict(zip(strings, translations)), work / f"lt-{fmt}.po")
                rows[f"LibreTranslate /translate, format {fmt}"] = {
                    **scores(sources, outputs, references), "valid file": file_checks(work / f"lt-{fmt}.po"),
                    "seconds": f"{seconds:.1f}"}
        if args.resource_files:
            rows.update(resource_files(found, args.model, work))
        proc, seconds = mt("translate", "-c", args.model, input="\n".join(s for _, s, _ in found) + "\n")
        bleu = sacrebleu.corpus_bleu(proc.stdout.splitlines(), [references]).score
        rows["mt translate, the sources without placeholders"] = {
            "entries kept whole": "-", "placeholders back": "-", "left empty": 0, "BLEU": f"{bleu:.1f}",
            "valid file": "-", "seconds": f"{seconds:.1f}"}
    columns = ["entries kept whole", "placeholders back", "left empty", "valid file", "BLEU", "seconds"]
    checked = sum(1 for e, _, _ in found if set(e.flags) & {"c-format", "python-format"})
    print(f"{len(found)} entries ({sum(1 for e, _, _ in found if e.msgid_plural)} plural, {checked} with a format flag "
          f"msgfmt checks) from {args.lines} dev lines, model {args.model}")
    print("| | " + " | ".join(columns) + " |\n|---|" + "---|" * len(columns))
    for name, row in rows.items():
        print(f"| {name} | " + " | ".join(str(row[c]) for c in columns) + " |")
    for line in notes:
        print(line)


if __name__ == "__main__":
    main()
