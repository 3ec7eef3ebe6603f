"""The documentation says what is true now: no development history in README.md, docs/, mt/ or scripts/, no
links outside the project, and the benchmark scripts it names parse their arguments as it says."""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Development-history wording: history belongs in `git log`, not in what a user reads.
HISTORY = re.compile(
    r"\bstops? \d+"  # numbered stops: "stop 12", "stops 26-34"
    r"|\bsessions?\b"  # "this session"
    r"|checkout before"  # "the checkout before"
    r"|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b",  # a commit id: hex with letters and digits
    re.IGNORECASE)
# The same check from a shell (it finds nothing):
#   grep -rnPi '\bstops? \d+|\bsessions?\b|checkout before|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b' \
#       README.md docs mt scripts --include='*.md' --include='*.py'


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "mt").rglob("*.py")),
            *sorted((ROOT / "scripts").glob("*.py"))]


def _history_lines(text: str) -> list[str]:
    return [f"{number}: {line.strip()}" for number, line in enumerate(text.splitlines(), 1) if HISTORY.search(line)]


@pytest.mark.parametrize("path", _documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_development_history_wording(path):
    assert _history_lines(path.read_text(encoding="utf-8")) == []


def test_the_history_check_finds_what_it_should_and_only_that():
    found = ["measured in stop 33", "stops 26-34 built it", "this session's CPU", "the checkout before it",
             "(7a98e81)", "commit 1c39a7345f0e1b2a"]
    passed = ["stopped at 1,200 updates", "train.max_steps=1000000", "eval_every: 1000000", "stop after 5",
              "sessions" + "tore", "a deadbeef-like word", "0x7fffffff", "checkpoint before resuming"]
    assert [line for line in found if not HISTORY.search(line)] == []
    assert [line for line in passed if HISTORY.search(line)] == []


def test_the_documentation_does_not_send_users_outside_the_project():
    outside = [f"{path.relative_to(ROOT)}: {line.strip()}" for path in _documents()
               for line in path.read_text(encoding="utf-8").splitlines() if "../shared" in line]
    assert outside == []


def test_every_relative_link_in_the_documentation_reaches_a_file():
    broken = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text(encoding="utf-8")):
            if "://" not in target and not (path.parent / target).exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert broken == []


def test_equal_updates_parses_its_protocol_and_builds_the_fairseq_command(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import equal_updates
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    args = equal_updates.parse_args(["--seeds", "1,2,3", "--only", "mt"])
    assert (args.updates, args.warmup, args.seeds) == (800, 400, [1, 2, 3])
    assert args.report_at == [50, 200, 350, 400, 600, 800]
    assert equal_updates.toolkits(args) == ["mt"]
    with pytest.raises(SystemExit):
        equal_updates.parse_args(["--report-at", "75"])
    command = equal_updates.fairseq_train_command(tmp_path / "venv", tmp_path, args, 3, tmp_path / "ckpt3")
    assert "--no-save" not in command and "--no-epoch-checkpoints" in command
    assert command[command.index("--seed") + 1] == "3"
    assert command[command.index("--save-dir") + 1] == str(tmp_path / "ckpt3")
    assert command[command.index("--max-update") + 1] == "800"
    assert command[command.index("--log-interval") + 1] == "50"

    class Pieces:  # fairseq-interactive prints pieces; the sentencepiece model joins them
        class sp:
            @staticmethod
            def decode_pieces(pieces):
                return "".join(pieces).replace("\u2581", " ").strip()

    output = "S-1\t\u2581b\nH-1\t-0.5\t\u2581B\u2581b\nH-0\t-0.2\t\u2581A\u2581a\nP-0\t-0.1\n"
    assert equal_updates.fairseq_hypotheses(output, Pieces) == ["A a", "B b"]


README_LIMIT = 15 * 1024  # bytes: the README is the front page; detail goes to a docs/*.md page it links


def test_the_readme_stays_under_15_kb():
    size = len((ROOT / "README.md").read_bytes())
    assert size < README_LIMIT, f"README.md is {size} bytes; move detail to docs/ (limit {README_LIMIT})"


def _layout_block() -> str:
    """The module map: the code block under docs/design.md's `## Layout`."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    return text.split("## Layout", 1)[1].split("```", 2)[1]


def test_the_readme_quotes_the_figures_a_make_demo_printed():
    """The README's demo figures are a `make demo` run's: scripts/demo.py prints them and writes them into
    runs/demo/demo.json, and docs/demo-run.json is that file copied (the demo's own test checks it writes the same
    fields)."""
    run = json.loads((ROOT / "docs" / "demo-run.json").read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    printed = re.search(r"dev BLEU ([\d.]+) greedy, ([\d.]+) beam 4 \(chrF ([\d.]+)\)", readme)
    assert printed, "README.md: no `dev BLEU X greedy, Y beam 4 (chrF Z)`, as scripts/demo.py prints it"
    assert [float(x) for x in printed.groups()] == [run["greedy_bleu"], run["beam4_bleu"], run["beam4_chrf"]]
    curve = re.search(r"dev BLEU \(greedy, every (\d+) updates: ([\d.]+), then ([\d.]+)\)", readme)
    assert curve, "README.md: the curves' caption names the demo's greedy BLEU at each evaluation"
    every, first, last = curve.groups()
    assert [[int(every), float(first)], [2 * int(every), float(last)]] == run["greedy_bleu_per_evaluation"]


def test_every_module_is_named_in_the_module_map():
    block = _layout_block()
    unnamed = [str(path.relative_to(ROOT)) for path in sorted((ROOT / "mt").rglob("*.py"))
               if path.name not in ("__init__.py", "__main__.py") and not re.search(rf"\b{path.name}\b", block)]
    assert unnamed == [], f"name them in docs/design.md's Layout: {unnamed}"
