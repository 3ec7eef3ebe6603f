"""`make demo` (scripts/demo.py) end to end at a tiny size: its own commands (train configs/demo.yaml, evaluate,
translate), with DEMO_STEPS, DEMO_DEV_LINES and DEMO_OUT making it a smoke run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from mt.checkpoint import load_checkpoint
from tests.conftest import ROOT, run_mt


def test_the_demo_trains_scores_the_dev_set_and_translates(tmp_path):
    out = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if k != "MT_DEBUG"}
    env.update(DEMO_STEPS="4", DEMO_DEV_LINES="8", DEMO_OUT=str(out))
    proc = subprocess.run([sys.executable, "scripts/demo.py"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    scores = lines[lines.index("== dev set, beam 4 (sacrebleu) ==") + 1:][:2]
    assert [s.split("\t")[0] for s in scores] == ["bleu", "chrf"] and 0 <= float(scores[0].split("\t")[1]) <= 100
    assert len((out / "dev.hyp.en").read_text(encoding="utf-8").splitlines()) == 8
    shown = lines[lines.index("== a few translations ==") + 1:][:6]
    sources, outputs = [s.removeprefix("  de: ") for s in shown[::2]], [s.removeprefix("  en: ") for s in shown[1::2]]
    assert len(sources) == 3 and all(s.startswith("  en: ") for s in shown[1::2])
    translated = run_mt("translate", "-c", out / "checkpoint_best.pt", input="".join(f"{s}\n" for s in sources))
    assert translated.stdout.split("\n")[:3] == outputs
    assert lines[-1].endswith(f"outputs in {out}") and load_checkpoint(out / "checkpoint_last.pt")["step"] == 4
    figures = json.loads((out / "demo.json").read_text(encoding="utf-8"))  # what docs/demo-run.json copies
    assert figures.keys() == json.loads((ROOT / "docs" / "demo-run.json").read_text(encoding="utf-8")).keys()
    assert figures["beam4_bleu"] == round(float(scores[0].split("\t")[1]), 2)
    assert figures["greedy_bleu_per_evaluation"] == [[4, figures["greedy_bleu"]]]
    assert (f"dev BLEU {figures['greedy_bleu']:.2f} greedy, {figures['beam4_bleu']:.2f} beam 4 "
            f"(chrF {figures['beam4_chrf']:.1f})") in lines[-2]
