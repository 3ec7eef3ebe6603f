"""Markdown (CommonMark with tables and strikethrough, parsed by markdown-it-py) translated block by block with
its syntax kept. Paragraphs, headings and table cells are translated; their inline markup (emphasis, strong,
strikethrough, links, inline HTML tags) is put back around the words aligned to its own as HTML's inline elements
are (mt/documents/inline_markup.py), and code spans, autolinks and images are written back as sent (an image's alt
text is not translated). Every other line (code blocks, HTML blocks, link reference definitions, rules, blank
lines) is kept as sent, and so are a block's own markers (#, >, list bullets and numbers, a setext underline).

What changes: a paragraph spanning several lines is written on one line after its markers (its line breaks
were soft, so it reads the same); a hard line break is written as a backslash and a line break; a link is
written inline, `[text](target "title")`, with its target and title as given (a reference link's definition
stays where it was), and with its source words where the translation left it none; emphasis whose words the
translation lost is not written (its markers alone would show); a table row is written as `| cell | cell |`;
characters of the translation that Markdown would read as markup (`\\ * _ [ ] < > \u0060`, and | in a table)
are escaped with a backslash.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mt.documents.html_events import html_events
from mt.documents.fragments import Fragments
from mt.documents.inline_markup import Tag, Unit, render_unit, unit_sentences
from mt.errors import needs

SPECIAL = re.compile(r"([\\`*_\[\]<>])")
CELL_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


@dataclass
class Block:
    """Source lines [first, end) written as `prefix`, the translated parts (units, and hard breaks as str), and
    `suffix`; a table row's cells are each such a list of parts."""
    first: int
    end: int
    prefix: str
    cells: list[list[Unit | str]] = field(default_factory=list)
    suffix: str = ""
    row: bool = False


class MarkdownDocument:
    """`sentences` to translate; `render` gives the translated Markdown."""

    def __init__(self, text: str):
        markdown_it = needs("markdown_it", "markdown-it-py", "documents")
        md = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"])
        md.normalizeLink = lambda url: url  # keep a link's target as written, not percent-encoded
        self.lines = text.splitlines(keepends=True)
        self.blocks = _blocks(md.parse(text), self.lines)
        self.sentences = [s for block in self.blocks for cell in block.cells for part in cell
                          if isinstance(part, Unit) for s in unit_sentences(part)]

    def render(self, translations: list[tuple[str, str | None]], fragments: Fragments | None = None) -> str:
        given, out, at = iter(translations), [], 0
        for block in self.blocks:
            out += self.lines[at:block.first]
            escape = _cell_escape if block.row else _escape
            cells = ["".join(p if isinstance(p, str) else render_unit(p, given, escape, fragments) for p in cell)
                     for cell in block.cells]
            out.append(block.prefix + (" | ".join(cells) if block.row else cells[0]) + block.suffix)
            at = block.end
        return "".join(out + self.lines[at:])


def _escape(text: str) -> str:
    return SPECIAL.sub(r"\\\1", text)


def _cell_escape(text: str) -> str:
    return CELL_SPECIAL.sub(r"\\\1", text)


def _blocks(tokens, lines: list[str]) -> list[Block]:
    blocks: list[Block] = []
    for i, token in enumerate(tokens):
        if token.type != "inline" or token.map is None:
            continue
        parent = tokens[i - 1].type
        if parent in ("th_open", "td_open"):
            if not blocks or blocks[-1].first != token.map[0] or not blocks[-1].row:
                blocks.append(_row(token.map[0], lines[token.map[0]]))
            blocks[-1].cells.append(_parts(token.children))
        elif parent in ("paragraph_open", "heading_open"):
            block = _block(token, lines)
            if block is not None:
                blocks.append(block)
    return blocks


def _block(token, lines: list[str]) -> Block | None:
    """A paragraph or heading: its first line's markers before the content, its last line's after it."""
    first, end = token.map
    content = token.content.split("\n")
    start = lines[first].find(content[0])
    close = lines[end - 1].rfind(content[-1]) if content[-1] else -1
    if start < 0 or close < 0:  # the content is not found as written (tabs in the markers): kept as sent
        return None
    return Block(first, end, lines[first][:start], [_parts(token.children)],
                 lines[end - 1][close + len(content[-1]):])


def _row(line_number: int, line: str) -> Block:
    body = line.rstrip("\r\n")
    indent = body[:len(body) - len(body.lstrip())]
    piped = body.strip()
    return Block(line_number, line_number + 1, indent + ("| " if piped.startswith("|") else ""),
                 suffix=(" |" if piped.endswith("|") else "") + line[len(body):], row=True)


def _parts(children) -> list[Unit | str]:
    """The inline tokens as units of text and tags, cut at hard line breaks."""
    parts: list[Unit | str] = [Unit()]
    links: list[dict] = []
    skip_to = -1
    for k, child in enumerate(children):
        unit = parts[-1]
        if k <= skip_to:
            continue
        kind = child.type
        if kind == "text":
            unit.text += child.content
        elif kind == "softbreak":
            unit.text += " "
        elif kind == "hardbreak":
            parts += ["\\\n", Unit()]
        elif kind.endswith("_open") and kind != "link_open":  # emphasis: its markers around no words would show
            unit.tags.append(Tag(len(unit.text), child.markup, "open", child.tag, when_empty="nothing"))
        elif kind.endswith("_close") and kind != "link_close":
            unit.tags.append(Tag(len(unit.text), child.markup, "close", child.tag))
        elif kind == "code_inline":
            pad = " " if child.content.startswith("`") or child.content.endswith("`") else ""
            unit.tags += [Tag(len(unit.text), child.markup + pad, "open", "code", child.content)]
            unit.text += child.content
            unit.tags.append(Tag(len(unit.text), pad + child.markup, "close", "code"))
        elif kind == "link_open" and child.markup == "autolink":
            end = next(j for j in range(k, len(children)) if children[j].type == "link_close")
            unit.tags.append(Tag(len(unit.text), "<" + "".join(c.content for c in children[k + 1:end]) + ">", "void"))
            skip_to = end
        elif kind == "link_open":
            links.append(child.attrs)
            unit.tags.append(Tag(len(unit.text), "[", "open", "a", when_empty="source"))
        elif kind == "link_close":
            unit.tags.append(Tag(len(unit.text), "](" + _target(links.pop() if links else {}) + ")", "close", "a"))
        elif kind == "image":
            alt = child.content.replace("]", "\\]")
            unit.tags.append(Tag(len(unit.text), f"![{alt}]({_target(child.attrs, 'src')})", "void", "img"))
        elif kind == "html_inline":
            event = next((e for e in html_events(child.content) if e.kind == "markup"), None)
            role, name = (event.role, event.name) if event and event.name else ("void", "")
            unit.tags.append(Tag(len(unit.text), child.content, role, name))
    return parts


def _target(attrs: dict, key: str = "href") -> str:
    """A link's or image's destination and title as Markdown writes them inline."""
    url = str(attrs.get(key, ""))
    if not url or re.search(r"[\s()<>]", url):
        url = "<" + url.replace("<", "\\<").replace(">", "\\>") + ">"
    title = attrs.get("title")
    return url + (' "' + str(title).replace('"', '\\"') + '"' if title else "")
