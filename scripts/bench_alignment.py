"""Which word aligner places inline markup better: mt's attention alignment (`--alignment`, what documents use)
or eflomal's (Östling and Tiedemann 2016, the aligner `mt clean` uses), measured where the right place is known.

The paragraphs are bench_documents.py's: dev lines with a token copied unchanged from source to reference. Where
the translation holds the token once, the right target span of a tag around it is that word. Each aligner's
links place the tag alone, without the copied-text rule that mt/documents/inline_markup.py applies first (the
span from the first to the last target word aligned to the token, its trailing punctuation cut): placed right
when the span is exactly the token. eflomal is fitted to the training corpus together with the (source,
translation) pairs, lower-cased and cut at white space as the placer counts words, and its forward links
(source word -> target words) are used, as attention's are. A third row fits eflomal once to the training corpus,
makes priors of it (`eflomal-makepriors`), and aligns each document of --paragraphs paragraphs alone with them,
as a server would: its time per document is printed beside it.

    .venv/bin/python scripts/bench_alignment.py [--model runs/demo/checkpoint_best.pt] [--train-lines 42840]
        [--paragraphs 20]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_documents  # noqa: E402

from mt.decoding.lines import LineText  # noqa: E402
from mt.decoding.text_front_end import translate_lines  # noqa: E402
from mt.decoding.loading import load_translator  # noqa: E402
from mt.documents.inline_markup import WORD, Element, _Placer  # noqa: E402

DATA = bench_documents.DATA


def eflomal_links(sources: list[str], targets: list[str], train_lines: int) -> list[str]:
    """eflomal's forward links of each (source, target) pair, fitted with the first `train_lines` training pairs."""
    import eflomal

    train_src, train_tgt = training_pairs(train_lines)
    with tempfile.TemporaryDirectory(prefix="mt-align-") as folder:
        links = Path(folder, "forward")
        eflomal.Aligner().align(train_src + _lowered(sources), train_tgt + _lowered(targets),
                                links_filename_fwd=str(links), quiet=True)
        found = links.read_text(encoding="utf-8").splitlines()
    return found[len(train_src):]


def _lowered(lines: list[str]) -> list[str]:
    return [" ".join(line.lower().split()) for line in lines]


def training_pairs(train_lines: int) -> tuple[list[str], list[str]]:
    return tuple(_lowered((DATA / f"train.{side}").read_text(encoding="utf-8").splitlines()[:train_lines])
                 for side in ("de", "en"))


def eflomal_with_priors(sources: list[str], targets: list[str], train_lines: int, size: int) -> tuple[list[str], float]:
    """Forward links of each pair, documents of `size` pairs aligned alone with priors made once from the
    training pairs; and the seconds a document took on average."""
    import eflomal

    src, tgt = training_pairs(train_lines)
    with tempfile.TemporaryDirectory(prefix="mt-priors-") as folder:
        path = {name: str(Path(folder, name)) for name in ("src", "tgt", "fwd", "rev", "priors", "links")}
        Path(path["src"]).write_text("\n".join(src) + "\n", encoding="utf-8")
        Path(path["tgt"]).write_text("\n".join(tgt) + "\n", encoding="utf-8")
        eflomal.Aligner().align(src, tgt, links_filename_fwd=path["fwd"], links_filename_rev=path["rev"], quiet=True)
        subprocess.run([str(Path(sys.executable).parent / "eflomal-makepriors"), "-s", path["src"], "-t", path["tgt"],
                        "-f", path["fwd"], "-r", path["rev"], "-p", path["priors"]], check=True)
        links, start = [], time.perf_counter()
        for at in range(0, len(sources), size):
            with open(path["priors"], encoding="utf-8") as priors:
                eflomal.Aligner().align(_lowered(sources[at:at + size]), _lowered(targets[at:at + size]),
                                        links_filename_fwd=path["links"], priors_input=priors, quiet=True)
            links += Path(path["links"]).read_text(encoding="utf-8").splitlines()
        documents = -(-len(sources) // size)
        return links, (time.perf_counter() - start) / documents


def placed_right(source: str, token: str, text: str, links: str) -> bool | None:
    """Whether the links alone put a tag around `token`'s source word exactly around its one occurrence in
    `text`; None where the translation does not hold it once."""
    pattern = rf"(?<![\w-]){re.escape(token)}(?![\w-])"
    held = [m.span() for m in re.finditer(pattern, text)]
    if len(held) != 1:
        return None
    at = re.search(pattern, source)
    pairs = [tuple(map(int, link.split("-"))) for link in links.split()]
    placer = _Placer(source, [m.span() for m in WORD.finditer(source)], text,
                     [m.span() for m in WORD.finditer(text)], pairs)
    span = placer._aligned(Element(at.start(), at.end(), "<b>", "</b>"))
    return span == held[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(bench_documents.ROOT / "runs" / "demo" / "checkpoint_best.pt"))
    ap.add_argument("--lines", type=int, default=883)
    ap.add_argument("--train-lines", type=int, default=42840)
    ap.add_argument("--paragraphs", type=int, default=20, help="pairs per document aligned with priors")
    args = ap.parse_args()
    items = bench_documents.paragraphs(args.lines)
    tr = load_translator(args.model, "cpu")
    with torch.inference_mode():
        found = translate_lines(tr, [LineText(s, i) for i, (s, _, _) in enumerate(items)], tr.cfg.decode,
                                alignment=True)
    texts = [per[0].text for per in found]
    start = time.perf_counter()
    fitted = eflomal_links([s for s, _, _ in items], texts, args.train_lines)
    seconds = time.perf_counter() - start
    sources = [s for s, _, _ in items]
    with_priors, per_document = eflomal_with_priors(sources, texts, args.train_lines, args.paragraphs)
    rows = {"attention (mt --alignment)": [per[0].alignment or "" for per in found],
            f"eflomal, fitted with {args.train_lines} training pairs ({seconds:.0f} s)": fitted,
            f"eflomal with priors, documents of {args.paragraphs} aligned alone ({1000 * per_document:.0f} ms each)":
                with_priors}
    print(f"{len(items)} paragraphs; translations holding their token once are scored")
    print("| aligner | tags placed right by the links alone |\n|---|---:|")
    for name, links in rows.items():
        judged = [placed_right(s, tok, t, a) for (s, _, tok), t, a in zip(items, texts, links)]
        scored = [j for j in judged if j is not None]
        print(f"| {name} | {sum(scored)}/{len(scored)} ({100 * sum(scored) / len(scored):.1f}%) |")


if __name__ == "__main__":
    main()
