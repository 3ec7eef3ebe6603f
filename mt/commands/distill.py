"""`mt distill CONFIG`: a small fast student from a strong teacher, by sequence-level knowledge distillation
(Kim and Rush, 2016): the student learns the teachers' beam translations of the training sources.

CONFIG is the student's training config with a `distill` section. Each step is skipped when done and resumes
after a kill (mt/commands/distill_corpus.py keeps the corpus; training resumes as `mt train` does); a setting
changed since is refused before anything is written, and `--restart` moves the earlier run aside to start over:
  a. the teachers translate data.train_src into output_dir/distilled/ (beam distill.beam_size);
  b. the teachers score each pair (as `mt score --normalize`) and the worst distill.filter_worst share is dropped;
  c. the student trains on the kept pairs (with distill.keep_original, also on the original ones) in output_dir;
  d. the student is exported to CTranslate2 int8, and its dev BLEU (fp32 and int8) and decoding speed are
     reported beside the teachers' in output_dir/distill.json.
The distilled corpus is text: the student trains its own tokenizer on it, as on any corpus.
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import replace
from pathlib import Path

import torch

from mt.checkpoint import load_checkpoint, step_checkpoints
from mt.config import Config, CorpusConfig
from mt.decoding.text_front_end import translate_lines
from mt.commands.distill_corpus import (MADE_BY, claim, filter_pairs, made_by, recorded_state,
                                        score_translations, translate_corpus)
from mt.data.languages import directions
from mt.data.prepare import STAMP
from mt.errors import MtError
from mt.interop.ctranslate2 import export_ctranslate2
from mt.atomic_files import atomic_write_text, read_record
from mt.folder_lock import folder_lock
from mt.training.corpus_scores import score_corpus
from mt.decoding.scoring import score_pairs
from mt.training.loop import train
from mt.decoding.loading import load_translator
from mt.decoding.protocol import Translator

DIRECTION_SAMPLE = 200  # training pairs scored both ways to tell the teachers' direction
EXPORT = "student-ct2-int8"
REPORT = "distill.json"


def distill(cfg: Config, log, restart: bool = False) -> int | None:
    """Steps a to d; returns the signal that stopped training early (resumable), or None when finished. With
    `restart`, what an earlier run made in output_dir is first moved aside (`set_aside_previous_run`)."""
    check_inputs(cfg)
    out = Path(cfg.output_dir)
    with folder_lock(out, "mt distill"):
        if restart:
            set_aside_previous_run(out, log)
        folder = out / "distilled"
        recorded = recorded_state(folder, cfg.distill.filter_worst)  # refused before any work, nothing touched
        finished_report(out)
        teachers = teacher_direction(load_translator(list(cfg.distill.teachers), cfg.train.device), cfg)
        check_direction(teachers, cfg)
        claim(folder, recorded, made_by(cfg, teachers))
        translate_corpus(teachers, cfg, folder, log)
        scores = score_translations(teachers, cfg, folder, log) if cfg.distill.filter_worst > 0 else None
        filter_pairs(cfg, folder, scores, log)
        result = train(student_config(cfg, folder))
        if result.stopped_by is not None:
            return result.stopped_by
        if cfg.distill.export:
            compare(cfg, teachers, log)
    return None


def check_inputs(cfg: Config) -> None:
    """One-line errors before any work: no teachers, a teacher or corpus file missing, a teacher inside
    output_dir, a corpus mt cannot read line by line."""
    d = cfg.data
    if not cfg.distill.teachers:
        raise MtError("distill.teachers: none given; mt distill needs at least one teacher (a checkpoint, or a "
                      "directory written by mt export)")
    for path in cfg.distill.teachers:
        if not Path(path).exists():
            raise MtError(f"distill.teachers: {path}: no such file or directory")
        _check_apart(cfg.output_dir, path)
    if d.train or d.dataset or not (d.train_src and d.train_tgt):
        raise MtError("mt distill translates the corpus of data.train_src and data.train_tgt; give it there (not "
                      "as data.train or data.dataset)")
    for key in ("train_src", "train_tgt"):
        if not Path(getattr(d, key)).is_file():
            raise MtError(f"data.{key}: no such file '{getattr(d, key)}'")


def _check_apart(output_dir: str, teacher: str) -> None:
    """Refuse an output_dir that is or holds a teacher (its run folder, say): the student would resume from, write
    over or (--restart) move the teacher's files."""
    out, found = Path(output_dir).resolve(), Path(teacher).resolve()
    if found == out or out in found.parents:
        raise MtError(f"output_dir {output_dir}: holds the teacher {teacher}; mt distill trains its student there: "
                      "use another output_dir")


def set_aside_previous_run(out: Path, log) -> None:
    """--restart, as `mt train --restart` does it: what an earlier mt distill made in `out` (its distilled corpus,
    the student's prepared data, checkpoints and log, the export and the report) is moved into a new dated
    folder there, never deleted; files mt did not make stay where they are."""
    old = [p for p in _previous_run(out) if p.exists()]
    if old:
        folder = _new_folder(out / time.strftime("previous-%Y%m%d-%H%M%S"))
        for p in old:
            p.rename(folder / p.name)
        log(f"distill: restart: moved the previous run's {len(old)} files and folders to {folder}")


def _previous_run(out: Path) -> list[Path]:
    """What mt distill makes in `out`: distilled/ and data/ (prepared from the kept pairs moved with it) only when
    they carry mt's record; without it they are someone else's, and stay."""
    mine = [out / "distilled" / MADE_BY, out / "data" / STAMP]
    folders = [record.parent for record in mine if record.is_file()]
    return [*folders, out / REPORT, out / EXPORT, out / "checkpoint_last.pt", out / "checkpoint_best.pt",
            *step_checkpoints(out), out / "metrics.jsonl"]


def _new_folder(path: Path) -> Path:
    """`path`, made; or `path`-2, -3, ... when it exists (two restarts within a second)."""
    for n in itertools.count(1):
        candidate = path if n == 1 else path.with_name(f"{path.name}-{n}")
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            continue


def teacher_direction(teachers: Translator, cfg: Config) -> Translator:
    """Multilingual teachers asked for the student's direction, data.src_lang to data.tgt_lang."""
    if not directions(teachers.cfg):
        return teachers
    return teachers.toward(cfg.data.src_lang, cfg.data.tgt_lang, "distill.teachers", ("data.src_lang", "data.tgt_lang"))


def check_direction(teachers, cfg: Config) -> None:
    """Refuse teachers that translate the other way. A checkpoint does not say its languages (data.src_lang is
    optional and file names are free), so the teachers score the first training pairs both ways: a teacher of
    this direction gives the targets, per token, a higher probability than it gives the sources read back."""
    sources, targets = _first_pairs(cfg, DIRECTION_SAMPLE)
    if not sources:
        return
    forward = _per_token(teachers, sources, targets)
    backward = _per_token(teachers, targets, sources)
    if backward > forward:
        raise MtError(f"distill.teachers: they translate data.train_tgt into data.train_src better than the other "
                      f"way (log-probability per token {backward:.2f} against {forward:.2f} on the first "
                      f"{len(sources)} pairs): trained for the other direction?")


def _per_token(tr, sources: list[str], targets: list[str]) -> float:
    d = tr.cfg.decode
    total = sum(score_pairs(tr, sources, targets, alpha=d.alpha, normalize=False))
    return total / sum(len(t) + 1 for t in tr.tgt_tokenizer.encode(targets))


def _first_pairs(cfg: Config, n: int) -> tuple[list[str], list[str]]:
    pairs = []
    with open(cfg.data.train_src, encoding="utf-8", errors="replace") as src, \
            open(cfg.data.train_tgt, encoding="utf-8", errors="replace") as tgt:
        for s, t in zip(src, tgt):
            if s.strip() and t.strip():
                pairs.append((s.strip(), t.strip()))
            if len(pairs) == n:
                break
    return [s for s, _ in pairs], [t for _, t in pairs]


def student_config(cfg: Config, folder: Path) -> Config:
    """The student's training config: the kept distilled pairs (and the original ones, weighted, if asked)."""
    corpora = [CorpusConfig(str(folder / "kept.src"), str(folder / "kept.tgt"))]
    if cfg.distill.keep_original:
        corpora.append(CorpusConfig(cfg.data.train_src, cfg.data.train_tgt, weight=cfg.distill.original_weight))
    return replace(cfg, data=replace(cfg.data, train=tuple(corpora), train_src=None, train_tgt=None))


def compare(cfg: Config, teachers, log) -> dict:
    """Step d: the student's int8 export, and dev BLEU and sentences/s of the teachers, the student and its
    export (beam distill.beam_size, this process's threads), in output_dir/distill.json."""
    out = Path(cfg.output_dir)
    best = out / "checkpoint_best.pt"
    student = best if best.is_file() else out / "checkpoint_last.pt"
    step = load_checkpoint(student)["step"]
    report = finished_report(out)
    if report is not None and report["student_step"] == step:
        log(f"distill: {out / REPORT} is complete; export and comparison skipped")
        return report
    export_ctranslate2(student, out / EXPORT, "int8", force=True)
    report = {"student": str(student), "student_step": step, "export": str(out / EXPORT)}
    if not cfg.data.dev_src:
        log("distill: no dev set (data.dev_src): the student is exported, not compared")
    else:
        sources = Path(cfg.data.dev_src).read_text(encoding="utf-8").splitlines()
        references = Path(cfg.data.dev_tgt).read_text(encoding="utf-8").splitlines()
        for name, tr in (("teachers", teachers), ("student fp32", load_translator(student, cfg.train.device)),
                         ("student int8", load_translator(out / EXPORT, "cpu"))):
            report[name] = _dev_figures(tr, sources, references, cfg.distill.beam_size)
            log(f"distill: {name}: dev BLEU {report[name]['bleu']:.2f}, "
                f"{report[name]['sentences_per_s']:.1f} sentences/s")
    atomic_write_text(out / REPORT, json.dumps(report, indent=1) + "\n")
    return report


def finished_report(out: Path) -> dict | None:
    """output_dir/distill.json of an earlier comparison, or None; a damaged one is a one-line error."""
    path = out / REPORT
    return read_record(path, "remove it to export and compare again", ("student_step",)) if path.is_file() else None


def _dev_figures(tr, sources: list[str], references: list[str], beam_size: int) -> dict:
    opts = replace(tr.cfg.decode, beam_size=beam_size)
    start = time.perf_counter()
    with torch.inference_mode():
        hyps = [r[0].text for r in translate_lines(tr, [s.strip() for s in sources], opts)]
    seconds = time.perf_counter() - start
    bleu = score_corpus(hyps, references, ["bleu"])["bleu"]["score"]
    return {"bleu": round(bleu, 2), "seconds": round(seconds, 2), "sentences_per_s": round(len(sources) / seconds, 1)}
