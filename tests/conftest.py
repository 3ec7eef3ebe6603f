"""Shared helpers: run the real `mt` command, and a tiny config pointed at the shipped sample data; for the
tests of several folders, a real `mt serve` (RunningServer), headless chromium (`browser`) and sentencepiece
models for small Marian models (`spm_models`, tests/marian_models.py)."""

from __future__ import annotations

import atexit
import fcntl
import importlib.metadata
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
import pytest
import sentencepiece as spm
import torch
from packaging.requirements import Requirement
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from mt.config import DecodeConfig, ModelConfig
from mt.decoding.lines import LineIds
from mt.decoding.protocol import SentenceRequest, max_output_lengths
from mt.model.transformer import Transformer, build_model
from mt.symbols import EOS
from tests.chromium import CHROMEDRIVER, CHROMIUM, CHROMIUM_FLAGS
from tests.mt_process import run_command

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "configs" / "tiny.yaml"
DATA = ROOT / "data" / "ddtp-de-en"
EXTRAS = ("dev", "plot", "ct2", "serve", "hf", "documents")  # what the Makefile installs; the tests import them, none skips
INSTALL = f"pip install -e '.[{','.join(EXTRAS)}]'"


def missing_extras() -> list[str]:
    """`name (extra)` for each package an extra the tests need declares (pyproject.toml, as mt's installed
    metadata records it) that is not installed."""
    try:
        declared = [Requirement(line) for line in importlib.metadata.requires("mt") or []]
    except importlib.metadata.PackageNotFoundError:
        return ["mt itself"]
    missing = []
    for requirement in declared:
        extra = next((e for e in EXTRAS if requirement.marker and requirement.marker.evaluate({"extra": e})), None)
        if extra is None:
            continue
        try:
            importlib.metadata.distribution(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(f"{requirement.name} ({extra})")
    return missing


def pytest_configure(config):
    """The whole session fails, with one line, where a declared extra is missing: a test is never skipped for
    it (the skips left are about the machine: CUDA, glibc, the kernel's huge-page mode)."""
    if missing := missing_extras():
        raise pytest.UsageError(f"not installed: {', '.join(dict.fromkeys(missing))}; the tests need every "
                                f"declared extra: {INSTALL} (as `make setup` does)")


def run_mt(*args, check=True, input=None, env=None, timeout=600, cwd=None) -> subprocess.CompletedProcess:
    """Run `python -m mt ARGS` and return the finished process (text mode): a real process, forked from one that
    has imported torch (tests/mt_process.py)."""
    full_env = {k: v for k, v in os.environ.items() if k != "MT_DEBUG"}
    full_env.update({"PYTHONUNBUFFERED": "1", **(env or {})})
    proc = run_command([str(a) for a in args], input, full_env, timeout, Path(cwd or ROOT))
    if check and proc.returncode != 0:
        raise AssertionError(f"mt {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def small_dev(lines: int = 100) -> Path:
    """A folder with the first `lines` pairs of the shipped dev set (dev.de, dev.en): the dev evaluation at the end
    of a test's short training costs a fraction of the full set's. One folder for the run, named by the process
    that removes it at exit: pytest's own (it may import this module twice), or under pytest-xdist the
    controller, so that a model one worker trained keeps its dev set while another reads it."""
    folder = Path(tempfile.gettempdir()) / f"mt-tests-dev{lines}-{_run_owner()}"
    if (folder / "dev.en").exists():
        return folder
    folder.mkdir(exist_ok=True)
    for side in ("de", "en"):  # dev.en last, each in place at once: a folder with dev.en is complete
        text = (DATA / f"dev.{side}").read_text(encoding="utf-8").splitlines(keepends=True)[:lines]
        part = folder / f".dev.{side}.{os.getpid()}"
        part.write_text("".join(text), encoding="utf-8")
        os.replace(part, folder / f"dev.{side}")
    return folder


def _run_owner() -> int:
    return os.getppid() if os.environ.get("PYTEST_XDIST_WORKER") else os.getpid()


if not os.environ.get("PYTEST_XDIST_WORKER"):
    atexit.register(lambda: [shutil.rmtree(p, True) for p in Path(tempfile.gettempdir()).glob(
        f"mt-tests-dev*-{os.getpid()}")])


def share_cores_between_workers() -> None:
    """Under pytest-xdist each worker, and each `mt` process it starts (the variable is inherited), takes its share
    of the cores: torch's default of every core per process would put two or more threads on each core, and
    those wait for each other at every parallel operation."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0"))
    if workers > 1:
        threads = max(1, len(os.sched_getaffinity(0)) // workers)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        torch.set_num_threads(threads)


share_cores_between_workers()


def built_once(tmp_path_factory, name: str, build) -> Path:
    """The folder `name`, made by `build(folder)` once for the whole run: under pytest-xdist the first worker to
    ask builds it (holding a lock) and the others read it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's folder, above each worker's own
    folder, done = root / name, root / f"{name}.done"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


TIMING_FILES = {"test_server.py", "test_server_hostile.py", "test_speed_paths.py"}  # measure time or memory


def pytest_collection_modifyitems(config, items):
    """Tests that measure time or memory are marked `timing`: `make test` runs them alone after the others, which
    run on two workers (pytest-xdist). The `slow` tests come first, so that the workers share out the rest around
    them instead of one of them finishing alone."""
    for item in items:
        if item.path.name in TIMING_FILES:
            item.add_marker(pytest.mark.timing)
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)  # stable: the order is otherwise kept


def tiny_overrides(out_dir: Path, **values) -> list[str]:
    """`--set` arguments for configs/tiny.yaml writing into `out_dir`, with absolute data paths."""
    settings = {
        "output_dir": str(out_dir),
        "data.train_src": str(DATA / "sample-2k.de"),
        "data.train_tgt": str(DATA / "sample-2k.en"),
        "data.dev_src": str(small_dev() / "dev.de"),  # the full 883 lines only where a test reads the scores
        "data.dev_tgt": str(small_dev() / "dev.en"),
        **values,
    }
    args = []
    for key, value in settings.items():
        args += ["--set", f"{key}={value}"]
    return args


def random_model(vocab: int, seed: int = 0, **changes) -> Transformer:
    """A randomly initialised small model in eval mode (joint vocabulary of `vocab`): its outputs differ per
    sentence and end at varied lengths. `changes` override its ModelConfig."""
    torch.manual_seed(seed)
    cfg = ModelConfig(**{"d_model": 32, "d_ff": 64, "n_heads": 4, "n_layers": 2, "dropout": 0.0,
                         "max_positions": 64, **changes})
    return build_model(cfg, vocab, vocab, joint_vocab=True).eval()


def random_sources(n: int, vocab: int, shortest: int = 1, longest: int = 14, seed: int = 1) -> list[list[int]]:
    """`n` token-id sentences of `shortest` to `longest` tokens (no special symbols), from `seed`."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(shortest, longest + 1, (n,), generator=generator).tolist()
    return [torch.randint(EOS + 1, vocab, (k,), generator=generator).tolist() for k in lengths]


@pytest.fixture(scope="module")
def model(request) -> Transformer:
    """The random model of a test module's VOCAB (`random_model`), shared by the module's search tests."""
    return random_model(request.module.VOCAB)


@pytest.fixture(scope="module")
def sources(request) -> list[list[int]]:
    """A test module's random sentences over its VOCAB: `random_sources(**SOURCES, vocab=VOCAB)`."""
    return random_sources(vocab=request.module.VOCAB, **request.module.SOURCES)


def lines_of(sources: list[list[int]], first_line: int = 0, prefixes: list[list[int]] | None = None,
             terms: list[list[list[int]]] | None = None) -> list[LineIds]:
    """Encoded input lines for `translate_ids`: line numbers from `first_line`, each with its prefix and terms."""
    return [LineIds(s, first_line + i, list(prefixes[i]) if prefixes else [], list(terms[i]) if terms else [])
            for i, s in enumerate(sources)]


def requests_of(sources: list[list[int]], opts: DecodeConfig, max_len=None, nbest: int = 1,
                prefixes: list[list[int]] | None = None, terms: list[list[list[int]]] | None = None,
                lines: list[int] | None = None, max_positions: int = 64) -> list[SentenceRequest]:
    """A SentenceRequest per source, for a backend's or a search's own tests. `max_len`: a number for every
    sentence, one per sentence (a list or a tensor), or by default opts.max_len_a * length + opts.max_len_b
    within the model's positions; `lines` default to the sources' indices."""
    if max_len is None:
        max_len = max_output_lengths(torch.tensor([len(s) for s in sources]), opts.max_len_a, opts.max_len_b,
                                     max_positions - 1)
    if isinstance(max_len, torch.Tensor):
        max_len = max_len.tolist()
    if isinstance(max_len, int):
        max_len = [max_len] * len(sources)
    return [SentenceRequest(tuple(s), int(max_len[i]), opts, lines[i] if lines is not None else i, nbest,
                            tuple(prefixes[i]) if prefixes else (),
                            tuple(tuple(t) for t in terms[i]) if terms else ())
            for i, s in enumerate(sources)]


def read_metrics(out_dir: Path, split: str = "train") -> list[dict]:
    rows = [json.loads(line) for line in (out_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r["split"] == split]


@pytest.fixture(scope="session")
def trained_tiny(tmp_path_factory) -> Path:
    """One tiny model trained through the CLI, shared by tests that only read it."""
    return built_once(tmp_path_factory, "tiny-run",
                      lambda out: run_mt("train", TINY, *tiny_overrides(out, **{"train.max_steps": 60})))


def one_error_line(proc: subprocess.CompletedProcess) -> str:
    """The single `error: ...` line a failed command printed on stderr, with no traceback."""
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    return lines[0]


class RunningServer:
    def __init__(self, checkpoint: Path, *options: str, spec: str | None = None):
        """`mt serve -m de:en=CHECKPOINT` (or `-m SPEC`) on a free port, once it says it is ready."""
        env = {k: v for k, v in os.environ.items() if k != "MT_DEBUG"}
        self.proc = subprocess.Popen([sys.executable, "-m", "mt", "serve", "-m", spec or f"de:en={checkpoint}",
                                      "--port", "0", *options], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.log: list[str] = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            line = self.proc.stderr.readline()
            self.log.append(line)
            if match := re.search(r"ready at (http://\S+)", line):
                self.url = match.group(1)
                break
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"mt serve ended: {''.join(self.log)}")
        else:
            raise AssertionError(f"mt serve not ready: {''.join(self.log)}")
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def post(self, path: str, timeout: float = 120, **kwargs) -> httpx.Response:
        return httpx.post(self.url + path, timeout=timeout, **kwargs)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=60)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=60)
        finally:
            self.proc.kill()


@pytest.fixture
def browser(tmp_path):
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    assert not missing, (f"{' and '.join(missing)} missing: install Debian's chromium and chromedriver "
                         "(apt-get install -y chromium chromium-driver; .ci/run does)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _sentencepiece(lines: list[str], vocab_size: int) -> bytes:
    """A unigram model with sentencepiece's own ids (<unk> 0, <s> 1, </s> 2), as Marian's are trained."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=vocab_size,
                                   model_type="unigram", character_coverage=1.0, num_threads=1, minloglevel=2)
    return model.getvalue()


@pytest.fixture(scope="session")  # bytes: nothing to change
def spm_models() -> dict[str, bytes]:
    de = (DATA / "sample-2k.de").read_text(encoding="utf-8").splitlines()
    en = (DATA / "sample-2k.en").read_text(encoding="utf-8").splitlines()
    return {"de": _sentencepiece(de, 300), "en": _sentencepiece(en, 300), "both": _sentencepiece(de + en, 500)}
