"""A tiny model trained with `data.inline_tags` translating every HTML case of the markup tests
(tests/documents/test_inline_markup.py) through a real server and `mt translate -i`: whatever tags it writes,
drops or repeats, each page comes back with every tag of its source once, byte for byte, well nested."""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest
import torch

from mt.decoding.model_backend import load_model_translator
from mt.documents.html_events import html_events
from tests.conftest import TINY, RunningServer, built_once, run_mt, tiny_overrides

pytestmark = pytest.mark.slow
MARKUP_TESTS = Path(__file__).parent / "test_inline_markup.py"


def markup_cases() -> list[str]:
    """The documents the markup tests give `translated` (a literal, or the `document` their test assigned)."""
    cases = []
    for test in ast.parse(MARKUP_TESTS.read_text(encoding="utf-8")).body:
        if not isinstance(test, ast.FunctionDef):
            continue
        assigned = {node.targets[0].id: node.value for node in ast.walk(test)
                    if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
        for node in ast.walk(test):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "translated":
                first = node.args[0]
                cases.append(ast.literal_eval(assigned[first.id] if isinstance(first, ast.Name) else first))
    return cases


def tags(page: str) -> list[tuple[str, str, str]]:
    return [(e.role, e.name, e.raw) for e in html_events(page) if e.kind == "markup"]


def assert_well_formed(source: str, page: str) -> None:
    """Every tag of the source once, as sent, and its elements' close tags after their open ones, nested."""
    assert Counter(raw for *_, raw in tags(page)) == Counter(raw for *_, raw in tags(source)), (source, page)
    opened = [name for role, name, _ in tags(source) if role == "open"]
    closed = {name for role, name, _ in tags(source) if role == "close"}
    stack = []
    for role, name, _ in tags(page):
        if role == "open" and name in closed:
            stack.append(name)
        elif role == "close" and name in opened:
            assert stack and stack[-1] == name, (source, page)
            stack.pop()


@pytest.fixture(scope="module")
def tag_trained(tmp_path_factory) -> Path:
    run = built_once(tmp_path_factory, "tiny-inline-tags", lambda out: run_mt(
        "train", TINY, *tiny_overrides(out, **{"data.inline_tags": 0.5, "train.max_steps": 120})))
    return run / "checkpoint_last.pt"


def test_the_cases_are_read_from_the_markup_tests():
    cases = markup_cases()
    assert len(cases) >= 25 and "<p>Das ist <b>sehr</b> gut.</p>" in cases


def test_every_markup_case_through_the_server_comes_back_well_formed(tag_trained):
    assert torch.load(tag_trained, weights_only=False)["config"]["data"]["inline_tags"] == 0.5
    cases = markup_cases()
    running = RunningServer(tag_trained)
    try:
        answer = running.post("/translate", json={"q": cases, "source": "de", "target": "en", "format": "html"})
        assert answer.status_code == 200, answer.text
        pages = answer.json()["translatedText"]
    finally:
        assert running.stop() == 0
    for source, page in zip(cases, pages, strict=True):
        assert_well_formed(source, page)


def test_mt_translate_of_a_page_of_every_case_comes_back_well_formed(tag_trained, tmp_path):
    page = "".join(f"<div>{case}</div>\n" for case in markup_cases() if "<html>" not in case)
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    proc = run_mt("translate", "-c", tag_trained, "-i", tmp_path / "page.html", "-o", tmp_path / "out.html")
    assert proc.returncode == 0, proc.stderr
    assert_well_formed(page, (tmp_path / "out.html").read_text(encoding="utf-8"))


def test_a_checkpoint_from_before_the_option_reads_and_writes_pages_as_before(trained_tiny, tmp_path):
    """A checkpoint whose config has no data.inline_tags (saved before it existed) is given plain sentences, and
    its pages come back byte for byte as from the same model saved with the option off."""
    ckpt = torch.load(trained_tiny / "checkpoint_last.pt", weights_only=False)
    assert ckpt["config"]["data"]["inline_tags"] == 0.0
    del ckpt["config"]["data"]["inline_tags"]
    torch.save(ckpt, tmp_path / "old.pt")
    assert not load_model_translator(tmp_path / "old.pt", "cpu").carries_tags
    page = "".join(f"<div>{case}</div>\n" for case in markup_cases() if "<html>" not in case)
    (tmp_path / "page.html").write_text(page, encoding="utf-8")
    outputs = []
    for model in (trained_tiny / "checkpoint_last.pt", tmp_path / "old.pt"):
        proc = run_mt("translate", "-c", model, "-i", tmp_path / "page.html", "-o", tmp_path / "out.html")
        assert proc.returncode == 0, proc.stderr
        outputs.append((tmp_path / "out.html").read_bytes())
        (tmp_path / "out.html").unlink()
    assert outputs[0] == outputs[1]
    assert_well_formed(page, outputs[0].decode("utf-8"))
