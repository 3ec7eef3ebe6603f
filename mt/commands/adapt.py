"""`mt adapt`: fine-tune a served model on users' corrections, mixed with a replay of its own training data, and
write it only if it did not get worse on a dev set.

The corrections come as TMX (`mt suggestions export`, reviewed and edited) or, when the operator says so with
`--unreviewed`, straight from the `mt serve --suggestions` database. They train as one corpus of `data.train` beside
the model's own training corpus (the replay), each with its weight, for `--steps` updates from the model's weights
(`train.init_from`, its tokenizers kept; the learning rate climbs the model's own warmup again, so a short
adaptation stays below its peak), in a run folder beside the output that is removed afterwards. The model
and the adapted one are scored (BLEU, beam as the checkpoint decodes) on the dev set; one that loses more than
`--max-bleu-loss` there is refused and nothing is written; else the adapted checkpoint is written to `-o` whole
or not at all. `mt serve` reloads its models on SIGHUP (docs/serving.md).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from mt.atomic_files import atomic_write
from mt.checkpoint import load_checkpoint
from mt.errors import MtError
from mt.serving.suggestions import export


def _mt(*args) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "mt", *map(str, args)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise MtError(f"mt {args[0]} failed: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}")
    return proc


def dev_bleu(checkpoint: Path, dev_src: Path, dev_ref: Path) -> float:
    return json.loads(_mt("evaluate", "-c", checkpoint, "--src", dev_src, "--ref", dev_ref, "--json",
                          "--metrics", "bleu").stdout)["bleu"]["score"]


def corrections_file(given: Path, folder: Path, unreviewed: bool) -> Path:
    """The corrections as a TMX file: `given`, or the database exported into `folder` (with --unreviewed only)."""
    if given.suffix.lower() not in (".db", ".sqlite", ".sqlite3"):
        return given
    if not unreviewed:
        raise MtError(f"--corrections {given}: a suggestions database holds what anyone sent; export it (mt "
                      "suggestions export), review the TMX and adapt on that, or say --unreviewed")
    exported = folder / "corrections.tmx"
    export(given, exported)
    return exported


def replay_entries(config: dict, weight: float) -> list[dict]:
    """The model's own training corpora, as data.train entries with `weight` shared among them."""
    data = config.get("data", {})
    entries = [dict(e) for e in data.get("train") or []] or \
        ([{"src": data["train_src"], "tgt": data["train_tgt"]}] if data.get("train_src") else [])
    missing = [e["src"] for e in entries if not Path(e["src"]).is_file()]
    if not entries or missing:
        raise MtError(f"the model's training data ({', '.join(missing) or 'none named'}) is not here to replay; "
                      "run mt adapt where it was trained, or give --replay-src and --replay-tgt")
    for e in entries:
        e["weight"] = weight / len(entries)
    return entries


def adapt(checkpoint: Path, corrections: Path, output: Path, dev_src: Path, dev_ref: Path, langs: tuple[str, str],
          steps: int, weight: float, max_bleu_loss: float, unreviewed: bool, replay: tuple[Path, Path] | None,
          log) -> tuple[float, float]:
    """Fine-tune, check, write; (dev BLEU before, after)."""
    config = load_checkpoint(checkpoint)["config"]
    folder = Path(tempfile.mkdtemp(prefix=f".{output.name}.adapt-", dir=output.parent))
    try:
        entries = [{"src": str(replay[0]), "tgt": str(replay[1]), "weight": 1.0}] if replay else \
            replay_entries(config, 1.0)
        entries.append({"src": str(corrections_file(corrections, folder, unreviewed)), "format": "tmx",
                        "weight": weight})  # read for data.src_lang and tgt_lang
        base = folder / "base.yaml"
        base.write_text(yaml.safe_dump(config), encoding="utf-8")
        run = folder / "run"
        log(f"adapt: {steps} updates from {checkpoint}, corrections weighted {weight} against the replay's 1")
        settings = {"output_dir": run, "data.train_src": "null", "data.train_tgt": "null", "data.dataset": "null",
                    "data.train": json.dumps(entries), "data.dev_src": dev_src, "data.dev_tgt": dev_ref,
                    "data.dev": "[]", "data.clean": "false",
                    "data.src_lang": langs[0], "data.tgt_lang": langs[1], "train.init_from": checkpoint,
                    "train.max_steps": steps,
                    "train.eval_every": steps, "train.save_every": steps,
                    "train.ema_decay": 0}
        _mt("train", base, *[arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")])
        before, after = dev_bleu(checkpoint, dev_src, dev_ref), dev_bleu(run / "checkpoint_last.pt", dev_src, dev_ref)
        log(f"adapt: dev BLEU {before:.2f} before, {after:.2f} after")
        if after < before - max_bleu_loss:
            raise MtError(f"the adapted model loses {before - after:.2f} BLEU on {dev_src} ({before:.2f} -> "
                          f"{after:.2f}), more than --max-bleu-loss {max_bleu_loss}; {output} not written")
        data = (run / "checkpoint_last.pt").read_bytes()
        atomic_write(output, lambda f: f.write(data))
        return before, after
    finally:
        shutil.rmtree(folder, ignore_errors=True)
