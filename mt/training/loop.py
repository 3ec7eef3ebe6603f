"""The training loop: train(cfg) -> path of the last checkpoint. Read it top to bottom.

A run's objects live in one `TrainingRun`, handed whole to the loop, evaluation, saving and resuming.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from mt.data.batching import BatchPrefetcher, BatchSchedule, padding_fraction
from mt.checkpoint import (
    ModelPart,
    ResumePart,
    checkpoint_dict,
    init_source,
    load_checkpoint,
    load_weights,
    read_resume_part,
    save_checkpoint,
    step_checkpoints,
    translation_weights,
)
from mt.config import Config, config_to_dict, data_identity, model_settings, save_config
from mt.data.parallel_text import check_sources, training_corpora
from mt.errors import CheckpointError, MtError
from mt.training.evaluation import StopRequested, evaluate
from mt.training.flops import MachinePeak
from mt.folder_lock import folder_lock
from mt.data.mixing import (MixedSchedule, PooledSchedule, batch_shares, corpus_weights, pools_directions,
                            training_schedule)
from mt.model.transformer import build_model, count_parameters
from mt.data.prepare import PreparedData, load_prepared, prepare_data
from mt.training.recipe import noam_lr
from mt.training.run_log import TensorBoardLog, append_metrics, truncate_metrics
from mt.runtime import Runtime, batch_padding, is_terminal, setup_runtime, teardown_runtime
from mt.training.update import Learner, make_learner, train_step


@dataclass
class TrainState:
    """The loop's counters; a checkpoint saves them (`step` in its model part, the others in its resume part)."""

    step: int = 0
    best_score: float = float("-inf")  # of train.best_metric, higher is better (minus the loss for loss)
    bad_steps: int = 0  # consecutive non-finite losses
    skipped_updates: int = 0
    best_step: int = -1
    evals_since_best: int = 0


@dataclass
class TrainingRun:
    """Everything one training run reads and changes."""

    cfg: Config
    rt: Runtime
    data: PreparedData
    learner: Learner  # the model, the wrapper the loop calls, the optimizer, the gradient scaler
    prefetcher: BatchPrefetcher  # the next training batches; its state() is the position a checkpoint saves
    state: TrainState
    window: Window  # the updates since the last log line
    say: Callable[[str], None]  # a line on stderr on rank 0; nothing on the other ranks
    board: TensorBoardLog | None = None  # with train.tensorboard, on rank 0
    saved_step: int | None = None  # the step checkpoint_last.pt holds, once this run wrote or resumed it

    @property
    def out(self) -> Path:
        return Path(self.cfg.output_dir)

    def close(self) -> None:
        self.prefetcher.close()
        if self.board is not None:
            self.board.close()


def log_line(message: str) -> None:
    """A line on stderr that does not break an active progress bar."""
    tqdm.write(message, file=sys.stderr)
    sys.stderr.flush()


@dataclass
class TrainResult:
    checkpoint: Path  # checkpoint_last.pt
    stopped_by: int | None  # the signal (SIGINT, SIGTERM) that stopped the run early, or None


def train(cfg: Config, restart: bool = False) -> TrainResult:
    check_sources(cfg.data)
    rt = setup_runtime(cfg.train, log=log_line)
    try:
        # One run per output_dir (rank 0 holds it for all the ranks of a torchrun job).
        with folder_lock(cfg.output_dir, "mt train") if rt.is_main else contextlib.nullcontext():
            return _train(cfg, rt, restart)
    finally:
        teardown_runtime(rt)


def _train(cfg: Config, rt: Runtime, restart: bool) -> TrainResult:
    run = _start_run(cfg, rt, restart)
    start, first_step = time.perf_counter(), run.state.step
    try:
        with StopRequested() as stop:
            why = _loop(run, stop)
    finally:
        run.close()
    run.say(_summary(run, why, first_step, time.perf_counter() - start))
    return TrainResult(run.out / "checkpoint_last.pt", stop.signal_number)


def _summary(run: TrainingRun, why: str, first_step: int, seconds: float) -> str:
    """The run's last line: how it ended, its steps and time, and its best dev score and checkpoint."""
    state, metric = run.state, run.cfg.train.best_metric
    minutes, secs = divmod(round(seconds), 60)
    line = (f"{why}: step {state.step} of {run.cfg.train.max_steps} ({state.step - first_step} in this process, "
            f"{minutes}m{secs:02d}s)")
    shares = batch_shares(run.prefetcher.state())
    if shares is not None:
        line += f"; batches by corpus {' / '.join(f'{share:.1%}' for share in shares)}"
    if state.best_step < 0:
        return line + "; no dev evaluation yet"
    best = -state.best_score if metric == "loss" else state.best_score
    return line + f"; best dev {metric} {best:.2f} at step {state.best_step}: {run.out / 'checkpoint_best.pt'}"


def _start_run(cfg: Config, rt: Runtime, restart: bool) -> TrainingRun:
    """Data, model, optimizer and batches, resumed from checkpoint_last.pt unless `restart` (or there is none)."""
    say = log_line if rt.is_main else (lambda message: None)
    data = _prepared_data(cfg, rt, restart, say)
    torch.manual_seed(cfg.train.seed)  # same initial weights on every rank
    model = build_model(cfg.model, len(data.src_tokenizer), len(data.tgt_tokenizer), cfg.tokenizer.joint)
    learner = make_learner(model.to(rt.device), cfg.train, rt)
    pad = batch_padding(cfg.data.pad_to_multiple, rt.device, cfg.train.compile)
    corpora, sizes = training_corpora(cfg.data), [len(p) for p in data.train_parts]
    weights = corpus_weights(corpora, sizes, cfg.data.temperature)
    if len(sizes) > 1 and pools_directions(corpora):
        schedule = PooledSchedule(data.train, sizes, weights, cfg.train.batch_tokens, cfg.train.seed, rt.rank, rt.world,
                                  pad, cfg.model.max_positions)
    else:
        schedule = training_schedule(data.train_parts, cfg.train.batch_tokens, weights, cfg.train.seed, rt.rank,
                                     rt.world, pad, cfg.model.max_positions)
    torch.manual_seed(cfg.train.seed + rt.rank)  # dropout differs per rank
    window = Window(rt.device, MachinePeak(rt.device, rt.autocast_dtype or torch.float32))
    run = TrainingRun(cfg, rt, data, learner, BatchPrefetcher(schedule, rt.device), TrainState(), window, say)
    last = run.out / "checkpoint_last.pt"
    if last.exists() and not restart:
        _resume(run, last)
        say(f"resuming from {last} at step {run.state.step}")
        if rt.is_main:
            truncate_metrics(run.out / "metrics.jsonl", run.state.step, say)
    else:
        if rt.is_main:
            _set_aside_previous_run(run.out, say)
        if cfg.train.init_from:
            _init_weights(run, cfg.train.init_from)
    if rt.is_main:
        save_config(cfg, run.out / "config.yaml")
    say(_describe(run))
    for line in _describe_corpora(run):
        say(line)
    if cfg.train.tensorboard and rt.is_main:
        run.board = TensorBoardLog(run.out / "tensorboard", run.state.step)
    return run


def _describe(run: TrainingRun) -> str:
    cfg, rt, pad = run.cfg, run.rt, run.prefetcher.schedule.pad_to_multiple
    schedules = _corpus_schedules(run)
    plans = [s.plan for s in schedules]
    padding = sum(padding_fraction(s.corpus, s.plan, pad) * len(s.plan) for s in schedules)
    return (f"model: {count_parameters(run.learner.model):,} parameters; device {rt.device}"
            f"{f' x {rt.world} processes' if rt.distributed else ''}; {sum(map(len, plans))} batches per epoch, "
            f"padding {padding / max(sum(map(len, plans)), 1):.1%} (lengths to a multiple of {pad})"
            f"{'; compiling the model' if cfg.train.compile else ''}")


def _corpus_schedules(run: TrainingRun) -> list[BatchSchedule]:
    schedule = run.prefetcher.schedule
    return schedule.schedules if isinstance(schedule, MixedSchedule) else [schedule]


def _describe_corpora(run: TrainingRun) -> list[str]:
    """With several corpora, a line for each: its pairs, batches and share of the batches (its weight)."""
    schedule = run.prefetcher.schedule
    corpora = training_corpora(run.cfg.data)
    if isinstance(schedule, PooledSchedule):
        sizes = np.diff(schedule.bounds).tolist()
        return [f"corpus {k + 1} of {len(corpora)}: {c.name}{_languages(c)}: {n:,} pairs, {share:.1%} of each "
                f"epoch's pairs ({share * sum(sizes) / n:.2f} times its own), in batches that mix the corpora"
                for k, (c, n, share) in enumerate(zip(corpora, sizes, schedule.shares))]
    if not isinstance(schedule, MixedSchedule):
        return []
    weights = corpus_weights(corpora, [len(s.corpus) for s in schedule.schedules], run.cfg.data.temperature)
    return [f"corpus {k + 1} of {len(corpora)}: {c.name}{_languages(c)}: {len(part.corpus):,} pairs, {len(part.plan)} "
            f"batches per epoch, weight {w:.3g} = {share:.1%} of the batches{f', tag {c.tag}' if c.tag else ''}"
            for k, (c, part, w, share) in enumerate(zip(corpora, schedule.schedules, weights,
                                                        schedule.shares.tolist()))]


def _languages(corpus) -> str:
    return f" ({corpus.src_lang}:{corpus.tgt_lang})" if corpus.src_lang else ""


def _init_weights(run: TrainingRun, path: str) -> None:
    """Fine-tuning: a new run starts from the weights of the checkpoint at `path`; its optimizer, schedule and
    step start fresh from this config (its tokenizers came in through `mt prepare`)."""
    ckpt = init_source(path, config_to_dict(run.cfg)["model"], run.cfg.tokenizer.joint)
    weights = translation_weights(ckpt)
    load_weights(run.learner.model, weights, path)
    if run.learner.ema is not None:
        run.learner.ema.load_state_dict(weights)
    averaged = " (its moving average)" if weights is not ckpt["model"] else ""
    run.say(f"fine-tuning: weights{averaged} of {path} (step {ckpt['step']}); optimizer, schedule and step "
            "start fresh")


def _set_aside_previous_run(out: Path, say) -> None:
    """On --restart, move the old run's checkpoints and log into a dated folder instead of deleting them."""
    old = [p for p in [out / "checkpoint_last.pt", out / "checkpoint_best.pt", *step_checkpoints(out),
                       out / "metrics.jsonl"] if p.exists()]
    if old:
        folder = out / time.strftime("previous-%Y%m%d-%H%M%S")
        folder.mkdir(exist_ok=True)
        for p in old:
            p.rename(folder / p.name)
        say(f"restart: moved the previous run's {len(old)} files to {folder}")


def _prepared_data(cfg: Config, rt: Runtime, restart: bool, say) -> PreparedData:
    """Rank 0 prepares (or reuses) the cache; the other ranks wait for it, then read it."""
    if rt.is_main:
        data = prepare_data(cfg, log=say, force=restart)
    rt.barrier()
    return data if rt.is_main else load_prepared(cfg)


def _loop(run: TrainingRun, stop: StopRequested) -> str:
    """Train until max_steps, a signal or train.patience; returns how it ended."""
    tc, rt = run.cfg.train, run.rt
    window = run.window
    run.say(f"mfu: against a matmul peak of {window.peak.flops / 1e12:.3f} TFLOP/s ({window.peak.where})")
    bar = tqdm(total=tc.max_steps, initial=run.state.step, disable=not (rt.is_main and is_terminal()),
               dynamic_ncols=True, unit="step")
    while run.state.step < tc.max_steps and stop.signal_name is None:
        lr = noam_lr(run.state.step + 1, run.cfg.model.d_model, tc.warmup_steps, tc.lr_scale)
        if _update(run, lr, window):
            bar.update(1)
            if _log_evaluate_save(run, lr, window, bar, stop):
                bar.close()
                _save_step(run, keep_step_file=False)
                return (f"stopped early: dev {tc.best_metric} did not improve in {tc.patience} evaluations "
                        f"(train.patience)")
    bar.close()
    if stop.signal_name is not None:
        _save_step(run, keep_step_file=False)
        run.say(f"{stop.signal_name}: saved {run.out / 'checkpoint_last.pt'} at step {run.state.step}; "
                "run the same command again to resume")
        return f"interrupted by {stop.signal_name}"
    return "finished"


def _update(run: TrainingRun, lr: float, window: Window) -> bool:
    """One optimizer update at learning rate `lr`, added to `window`; False if a non-finite loss skipped it."""
    for group in run.learner.optimizer.param_groups:
        group["lr"] = lr
    sums, flops, skipped = train_step(run.cfg, run.rt, run.learner, run.prefetcher)
    state = run.state
    # The one host read of a step: whether the device skipped the update. It comes after the update is
    # queued, so the device never waits for the host; the loss sums stay on the device until a log line.
    if bool(skipped):
        state.bad_steps += 1
        state.skipped_updates += 1
        run.say(f"step {state.step + 1}: non-finite loss, update skipped ({state.bad_steps} in a row)")
        if state.bad_steps >= run.cfg.train.max_bad_steps:
            raise MtError(f"{state.bad_steps} non-finite losses in a row at step {state.step + 1}; lower "
                          f"train.lr_scale or use train.precision fp32/bf16 (last good checkpoint kept in {run.out})")
        return False
    state.bad_steps = 0
    state.step += 1
    if run.learner.ema is not None:
        run.learner.ema.update(state.step)
    window.add(sums, flops)
    return True


def _log_evaluate_save(run: TrainingRun, lr: float, window: Window, bar, stop: StopRequested) -> bool:
    """After an update: a log line, a dev evaluation and checkpoints, each when its interval comes round.
    True when train.patience evaluations in a row did not improve the best score: time to stop."""
    tc, step = run.cfg.train, run.state.step
    on_schedule = step % tc.log_every == 0
    if on_schedule or step == tc.max_steps:  # a last line off the schedule leaves the window open: a run
        _log_train(run, lr, window, bar, new_window=on_schedule)  # continued to a later max_steps logs as one

    start = time.perf_counter()
    evaluated = (step % tc.eval_every == 0 or step == tc.max_steps) and run.data.dev is not None
    if evaluated:
        _track_best(run, evaluate(run, stop, lambda row: _record(run, row)))
    if step % tc.save_every == 0 or step == tc.max_steps:
        _save_step(run)
    window.exclude(time.perf_counter() - start)  # training speed is the updates' alone
    if not evaluated or tc.patience == 0:
        return False
    # Rank 0 evaluated; every rank must agree to stop (a host read, at evaluations only).
    out_of_patience = float(tc.patience <= run.state.evals_since_best)
    return bool(run.rt.sum(torch.tensor([out_of_patience], device=run.rt.device)).item())


def _track_best(run: TrainingRun, score: float | None) -> None:
    """checkpoint_best.pt follows the best dev score; count the evaluations since it (rank 0)."""
    state = run.state
    if score is None:
        return
    if score > state.best_score:
        state.best_score, state.best_step, state.evals_since_best = score, state.step, 0
        _save(run, run.out / "checkpoint_best.pt", _checkpoint(run))
    else:
        state.evals_since_best += 1


class Window:
    """Sums since the last log line: losses and tokens on the device (read once per line), FLOPs, updates and
    the time they took."""

    def __init__(self, device: torch.device, peak: MachinePeak):
        self.device, self.peak = device, peak
        self.reset(time.perf_counter())

    def reset(self, now: float) -> None:
        self.sums, self.flops, self.updates, self.start = torch.zeros(3, device=self.device), 0.0, 0, now

    def pending(self) -> tuple:
        """What the window holds so far (reads the device): (loss, nll, tokens, FLOPs, updates, seconds)."""
        return (*self.sums.tolist(), self.flops, self.updates, time.perf_counter() - self.start)

    def restore(self, pending: tuple) -> None:
        """Continue the window `pending` describes (nothing: an empty window)."""
        if pending:
            *sums, self.flops, self.updates, seconds = pending
            self.sums = torch.tensor(sums, device=self.device)
            self.start = time.perf_counter() - seconds

    def add(self, sums: torch.Tensor, flops: float) -> None:
        self.sums += sums
        self.flops += flops
        self.updates += 1

    def exclude(self, seconds: float) -> None:
        """Leave `seconds` spent on other work (evaluation, checkpoints) out of the window's time."""
        self.start += seconds

    def row(self, new_window: bool = True) -> dict:
        """The metrics of the window (reads the device once), then (if `new_window`) starts a new window."""
        now = time.perf_counter()
        loss, nll, tokens = self.sums.tolist()
        seconds, tokens = max(now - self.start, 1e-9), max(tokens, 1.0)
        row = {"loss": round(loss / tokens, 4), "nll": round(nll / tokens, 4),
               "ppl": round(math.exp(min(nll / tokens, 50)), 2), "tokens_per_s": round(tokens / seconds, 1),
               "seconds_per_update": round(seconds / max(self.updates, 1), 4),
               "mfu": round(self.peak.mfu(self.flops / seconds), 4)}
        if new_window:  # from now, not `now`: the peak's measurement that `mfu` may make is no window's time
            self.reset(time.perf_counter())
        return row


def _log_train(run: TrainingRun, lr: float, window: Window, bar, new_window: bool = True) -> None:
    row = {"step": run.state.step, "split": "train", **window.row(new_window), "lr": lr,
           "skipped_updates": run.state.skipped_updates}
    if not run.rt.is_main:
        return
    _record(run, row)
    if bar.disable:
        run.say(f"step {row['step']}: loss {row['loss']:.3f} ppl {row['ppl']:.2f} lr {lr:.2e} "
                f"{row['tokens_per_s']:.0f} tok/s mfu {row['mfu']:.1%}")
    else:
        bar.set_postfix(loss=f"{row['loss']:.3f}", lr=f"{lr:.2e}", tok_s=f"{row['tokens_per_s']:.0f}",
                        mfu=f"{row['mfu']:.1%}")


def _record(run: TrainingRun, row: dict) -> None:
    """A metrics row into metrics.jsonl (and TensorBoard, when asked for)."""
    try:
        append_metrics(run.out / "metrics.jsonl", row)
    except MtError as e:
        raise MtError(f"{e}; training stopped at step {run.state.step}, {_kept(run)}") from None
    if run.board is not None:
        run.board.add(row)


def _checkpoint(run: TrainingRun) -> dict:
    """The run as mt.checkpoint defines a checkpoint: the model part and the resume part."""
    learner, state, data = run.learner, run.state, run.data
    rng = {"torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        rng["cuda"] = torch.cuda.get_rng_state_all()
    model_part = ModelPart(config=config_to_dict(run.cfg), model=learner.model.state_dict(), step=state.step,
                           src_tokenizer=data.src_tokenizer.to_tensor(), tgt_tokenizer=data.tgt_tokenizer.to_tensor(),
                           ema_model=learner.ema.state_dict() if learner.ema is not None else None)
    resume_part = ResumePart(optimizer=learner.optimizer.state_dict(), scaler=learner.scaler.state_dict(), rng=rng,
                             data_state=run.prefetcher.state(), best_score=state.best_score, bad_steps=state.bad_steps,
                             skipped_updates=state.skipped_updates, best_step=state.best_step,
                             evals_since_best=state.evals_since_best, log_window=run.window.pending())
    return checkpoint_dict(model_part, resume_part)


def _save_step(run: TrainingRun, keep_step_file: bool = True) -> None:
    """checkpoint_last.pt, plus checkpoint_<step>.pt keeping the newest `keep_last` of those (rank 0 only)."""
    if run.rt.is_main:
        ckpt, keep_last = _checkpoint(run), run.cfg.train.keep_last
        _save(run, run.out / "checkpoint_last.pt", ckpt)
        run.saved_step = run.state.step
        if keep_step_file and keep_last > 0:
            _save(run, run.out / f"checkpoint_{run.state.step}.pt", ckpt)
            for old in step_checkpoints(run.out)[:-keep_last]:
                old.unlink(missing_ok=True)
    run.rt.barrier()


def _save(run: TrainingRun, path: Path, ckpt: dict) -> None:
    """save_checkpoint; if it cannot write (disk full, quota, permissions), training stops with one line that
    says which checkpoint is kept."""
    try:
        save_checkpoint(path, ckpt)
    except CheckpointError as e:
        raise MtError(f"{e}; training stopped at step {run.state.step}, {_kept(run)}") from None


def _kept(run: TrainingRun) -> str:
    last = run.out / "checkpoint_last.pt"
    return (f"{last} (step {run.saved_step}) is kept" if run.saved_step is not None and last.exists()
            else "no checkpoint of this run was saved")


def _intact_alternative(last: Path) -> str:
    """What to do when `last` (checkpoint_last.pt) cannot be read: the newest step checkpoint beside it that
    can, or starting over."""
    for step_file in reversed(step_checkpoints(last.parent)):
        try:
            load_checkpoint(step_file)
        except CheckpointError:
            continue
        return f"the newest intact one is {step_file}: copy it to {last} to resume from it, or pass --restart"
    return "no intact checkpoint_N.pt beside it: pass --restart to start over"


def _resume(run: TrainingRun, path: Path) -> None:
    """Continue from the checkpoint at `path`: weights, optimizer, scaler, batch position, counters and (in a
    single process) the random state."""
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as e:
        raise CheckpointError(f"{e}; {_intact_alternative(path)}") from None
    resume = read_resume_part(ckpt, path)
    _check_compatible(ckpt["config"], run.cfg, path)
    load_weights(run.learner.model, ckpt["model"], path)
    if run.learner.ema is not None:  # a run that turns train.ema_decay on starts its average at these weights
        run.learner.ema.load_state_dict(ckpt.get("ema_model") or ckpt["model"])
    run.learner.optimizer.load_state_dict(resume.optimizer)
    run.learner.scaler.load_state_dict(resume.scaler)
    run.prefetcher.load_state(resume.data_state)
    run.state = TrainState(ckpt["step"], resume.best_score, resume.bad_steps, resume.skipped_updates,
                           resume.best_step, resume.evals_since_best)
    run.saved_step = ckpt["step"]
    run.window.restore(resume.log_window)
    if run.rt.world == 1:  # random state is per process; exact resume is promised for single-process runs
        torch.set_rng_state(resume.rng["torch"])
        if "cuda" in resume.rng and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(resume.rng["cuda"])


def _check_compatible(saved: dict, cfg: Config, path: Path) -> None:
    """Refuse to continue a checkpoint whose model, tokenizer or data differ from the current config."""
    current = {"model": config_to_dict(cfg)["model"], **data_identity(cfg)}
    saved = {**saved, "model": model_settings(saved["model"])}
    changed = [f"{section}.{key}" for section, values in current.items()
               for key in values if saved.get(section, {}).get(key) != values[key]]
    if changed:
        raise CheckpointError(f"{path}: saved with a different config ({', '.join(changed)} differ); "
                              "use another output_dir or pass --restart to start over")
