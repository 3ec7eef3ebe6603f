"""Serving benchmark: closed-loop HTTP clients over loopback against `mt serve` (cross-request batching),
`mt serve --no-batching` (one request at a time, as OpenNMT-py's server), LibreTranslate 1.9 serving the same
model (exported to CTranslate2 and packed as an Argos package), and offline `mt translate` of the same sentences
as the ceiling.

    python scripts/bench_serve.py --model CKPT [--pair de:en] [--concurrency 1,8,32,128] [--seconds 15]
        [--servers mt,mt-no-batching,libretranslate,offline] [--rounds 1] [--ltvenv .venv-lt] [--json]

`mt-export`, `mt-export-no-batching` and `offline-export` are the same rows with the checkpoint exported to
CTranslate2 (`mt export`, the directory LibreTranslate's package is made of) and served or translated by mt;
`mt-export-parallel` serves the export with `--parallel-batches` as many as the cores (CTranslate2 decodes that
many calls at once, each on one thread); `mt-export-int8` the same with
`--quantize int8` (CTranslate2's int8, as LibreTranslate decodes) and `mt-int8` the checkpoint with int8 weights.

Each client of a cell sends its next request (LibreTranslate's `POST /translate`) as soon as the previous one is
answered, until `--seconds` have passed; requests in flight then are waited for. Requests are one dev line
(`sentence`) or 20 dev lines joined with newlines as one `q` (`document`), taken in turn from
data/ddtp-de-en/dev.de. Per cell: dev lines per second (all answered lines over the time to the last answer),
latency p50/p95/p99 over the answered requests, errors (an HTTP status other than 200, or a body without
translatedText), refusals (503 with Retry-After: a full queue; the client waits that long, at most 5 s, and
goes on), lost requests (no HTTP answer at all) and the server's peak resident memory. Servers start as
subprocesses one after another, each on a free port; with --rounds N the servers take turns N times.

The `offline` row is `mt translate -c CKPT -i FILE` over the dev lines (--offline-lines: the first N), one
process: lines over (its wall time less that of the same command on one line, i.e. less start-up and model
load). The `alone` reference is each of the first --alone-lines dev lines decoded alone in-process, as the
sentences a one-line request is split into (translate_lines on them together), for the one-client latency target.
The `in-process, no HTTP` rows (also with `offline`) are the server's decoding alone: threads of one process,
as many as the clients of a cell, each keep a dev line in flight through `mt serve`'s DecodeThread and worker
(split, encode, decode, detokenize), for --seconds each: what the HTTP server could reach at that concurrency.

LibreTranslate runs from its own virtual environment (--ltvenv, the Makefile's .venv-lt), offline: the bench
writes two Argos packages (de->en and en->de, the same model files) into a private data folder and starts
LibreTranslate through scripts/libretranslate_offline.py, which skips its start-up download of model indexes and
replaces Argos's sentence splitter (minisbd, which downloads a model at first use) with a regular expression
splitting after . ! ? before white space. Argos decodes with beam 4 and its own length penalty (0.2), in sub-batches of 32 tokens.
LibreTranslate gets the CTranslate2 setting that was fastest for it here: as many threads as cores
(ARGOS_INTRA_THREADS, `--lt-intra-threads`) with oneDNN's matrix products (CT2_USE_MKL=0, `--lt-ct2-mkl`); at
CTranslate2's own choice on an Intel CPU (MKL) two threads made one sentence 131 ms against 20.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from pathlib import Path

import libretranslate_offline

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = ROOT / "scripts" / "libretranslate_offline.py"
DEV = ROOT / "data" / "ddtp-de-en" / "dev.de"
MT = [sys.executable, "-m", "mt"]
DOC_LINES = 20


LANG_NAMES = {"de": "German", "en": "English", "fr": "French", "es": "Spanish", "it": "Italian", "cs": "Czech",
              "ru": "Russian", "ro": "Romanian", "fi": "Finnish", "nl": "Dutch", "pt": "Portuguese"}


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- the clients


def rss_mb(pid: int | None) -> float:
    """A process's resident memory with its children's (MB), 0 when gone."""
    total = 0.0
    todo = [pid] if pid else []
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except (OSError, ValueError):
            pass
    return total


async def run_cell(url: str, source: str, target: str, lines: list[str], kind: str, concurrency: int,
                   seconds: float, timeout: float, pid: int | None = None) -> dict:
    """`concurrency` closed-loop clients for `seconds`; the cell's numbers. The clients are aiohttp's: they share
    the server's cores, and httpx's async client took 5 s of CPU in 9 s at 128 clients (aiohttp's 0.4), which
    made an exported model's server look 3x slower there than it is."""
    import aiohttp

    per_request = 1 if kind == "sentence" else DOC_LINES
    state = {"next": 0}
    latencies, sentences, errors, lost, refused, samples = [], [0], [0], [0], [0], []

    def next_q() -> str:
        i = state["next"]
        state["next"] += per_request
        return "\n".join(lines[(i + k) % len(lines)] for k in range(per_request))

    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(url, connector=connector, timeout=aiohttp.ClientTimeout(total=timeout)) as client:
        start = time.perf_counter()
        deadline = start + seconds
        last = [start]

        async def one_client():
            while time.perf_counter() < deadline:
                q = next_q()
                t0 = time.perf_counter()
                try:
                    async with client.post("/translate", json={"q": q, "source": source, "target": target,
                                                               "format": "text"}) as r:
                        status, retry_after, body = r.status, r.headers.get("retry-after"), await r.text()
                except (aiohttp.ClientError, asyncio.TimeoutError) as e:  # no HTTP answer: a lost request
                    lost[0] += 1
                    if len(samples) < 3:
                        samples.append(f"lost: {type(e).__name__}: {e}")
                    await asyncio.sleep(0.1)
                    continue
                t1 = time.perf_counter()
                last[0] = max(last[0], t1)
                try:
                    ok = status == 200 and isinstance(json.loads(body).get("translatedText"), str)
                except ValueError:
                    ok = False
                if not (status == 503 and retry_after):
                    latencies.append(t1 - t0)  # of answered requests; refused ones are counted apart
                if ok:
                    sentences[0] += per_request
                elif status == 503 and retry_after:  # refused, not dropped: wait, go on
                    refused[0] += 1
                    await asyncio.sleep(min(float(retry_after), 5.0))
                else:
                    errors[0] += 1
                    if len(samples) < 3:
                        samples.append(f"HTTP {status}: {body[:200]}")

        peak = [rss_mb(pid)]

        async def watch():
            while True:
                peak[0] = max(peak[0], rss_mb(pid))
                await asyncio.sleep(0.5)

        watcher = asyncio.create_task(watch())
        await asyncio.gather(*(one_client() for _ in range(concurrency)))
        watcher.cancel()
    elapsed = last[0] - start
    return {"kind": kind, "concurrency": concurrency, "requests": len(latencies) + refused[0] + lost[0],
            "sentences": sentences[0], "seconds": round(elapsed, 2),
            "sentences_per_s": round(sentences[0] / elapsed, 2) if elapsed > 0 else 0.0,
            "p50_ms": round(1000 * percentile(latencies, 0.50), 1),
            "p95_ms": round(1000 * percentile(latencies, 0.95), 1),
            "p99_ms": round(1000 * percentile(latencies, 0.99), 1),
            "errors": errors[0], "refused_503": refused[0], "lost": lost[0], "server_rss_mb": round(peak[0]), "samples": samples}


# ---------------------------------------------------------------- the servers


class Proc:
    memory_gb = 0.0  # address-space limit of the servers (RLIMIT_AS), 0: none

    def __init__(self, argv: list[str], env: dict | None, log: Path):
        self.log = log
        self.handle = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdout=self.handle, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                     preexec_fn=self.limit)

    def limit(self) -> None:
        if self.memory_gb > 0:
            import resource
            size = int(self.memory_gb * 2**30)
            resource.setrlimit(resource.RLIMIT_AS, (size, size))

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.handle.close()
        return self.proc.returncode


def start_mt(model: str, pair: tuple[str, str], batching: bool, device: str, work: Path,
             name: str = "mt", parallel_batches: int = 1, quantize: str | None = None) -> tuple[Proc, str]:
    argv = MT + ["serve", "-m", f"{pair[0]}:{pair[1]}={model}", "--port", "0", "--device", device,
                 "--parallel-batches", str(parallel_batches)] + (["--quantize", quantize] if quantize else [])
    if not batching:
        argv.append("--no-batching")
    proc = Proc(argv, None, work / f"{name}.log")
    t0 = time.time()
    while time.time() - t0 < 300:
        if proc.proc.poll() is not None:
            raise RuntimeError(f"mt serve exited with {proc.proc.returncode}:\n{proc.tail()}")
        for line in proc.log.read_text(errors="replace").splitlines():
            if line.startswith("mt serve: ready at "):
                return proc, line.split("ready at ", 1)[1].strip()
        time.sleep(0.2)
    proc.stop()
    raise RuntimeError(f"mt serve not ready in 300 s:\n{proc.tail()}")


def lt_env(work: Path, device: str, intra_threads: int | None = None, ct2_mkl: str = "0") -> dict:
    env = libretranslate_offline.environment(work / "lt")
    env.pop("CT2_USE_MKL", None)
    if ct2_mkl != "library":
        env["CT2_USE_MKL"] = ct2_mkl
    env["ARGOS_DEVICE_TYPE"] = "cuda" if device == "cuda" else "cpu"
    if intra_threads is not None:
        env["ARGOS_INTRA_THREADS"] = str(intra_threads)
    return env


def exported(model: str, work: Path) -> Path:
    """The model exported to CTranslate2 once per bench (for LibreTranslate and the mt-export rows)."""
    export = work / "export"
    if not export.exists():
        subprocess.run(MT + ["export", "-c", model, "-o", str(export)], check=True, cwd=ROOT)
    return export


def prepare_lt(model: str, pair: tuple[str, str], ltvenv: Path, device: str, work: Path) -> Path:
    """Export the model, pack and install two Argos packages; the launcher's path."""
    python = ltvenv / "bin" / "python"
    if not python.exists():
        raise RuntimeError(f"no {python}: make it with `python3 -m venv {ltvenv} && {ltvenv}/bin/pip install "
                           "libretranslate`")
    export = exported(model, work)
    joint = (export / "source.spm").read_bytes() == (export / "target.spm").read_bytes()
    if not joint:
        print("note: the model's sentencepiece models are not joint; Argos decodes the target with the source "
              "one", file=sys.stderr)
    lt = work / "lt"
    shutil.rmtree(lt, ignore_errors=True)
    (lt / "packages").mkdir(parents=True)
    zips = []
    for src, tgt in (pair, pair[::-1]):
        name = f"translate-{src}_{tgt}"
        folder = lt / "build" / name
        shutil.copytree(export, folder / "model")
        shutil.copyfile(export / "source.spm", folder / "sentencepiece.model")
        (folder / "metadata.json").write_text(json.dumps({
            "package_version": "1.0", "argos_version": "1.0", "from_code": src, "to_code": tgt,
            "from_name": LANG_NAMES.get(src, src), "to_name": LANG_NAMES.get(tgt, tgt), "type": "translate"}))
        archive = lt / f"{name}.argosmodel"
        with zipfile.ZipFile(archive, "w") as z:
            for path in sorted(folder.rglob("*")):
                z.write(path, path.relative_to(folder.parent))
        zips.append(str(archive))
    libretranslate_offline.call(lt, "install", *zips, python=python)
    return OFFLINE


def start_lt(launcher: Path, pair: tuple[str, str], ltvenv: Path, device: str, work: Path,
             intra_threads: int | None, ct2_mkl: str) -> tuple[Proc, str]:
    port = free_port()
    argv = [str(ltvenv / "bin" / "python"), str(launcher), "serve", "--host", "127.0.0.1", "--port", str(port),
            "--load-only", f"{pair[0]},{pair[1]}"]
    proc = Proc(argv, lt_env(work, device, intra_threads, ct2_mkl), work / "libretranslate.log")
    url = f"http://127.0.0.1:{port}"
    t0 = time.time()
    while time.time() - t0 < 300:
        if proc.proc.poll() is not None:
            raise RuntimeError(f"LibreTranslate exited with {proc.proc.returncode}:\n{proc.tail()}")
        try:
            with urllib.request.urlopen(url + "/languages", timeout=5):
                return proc, url
        except OSError:  # not listening yet, or an HTTP error status
            pass
        time.sleep(0.5)
    proc.stop()
    raise RuntimeError(f"LibreTranslate not ready in 300 s:\n{proc.tail()}")


# ---------------------------------------------------------------- offline references


def offline(model: str, lines: list[str], device: str, work: Path) -> dict:
    """`mt translate` over `lines`, one process; its start-up measured on one line and taken off."""
    def timed(chunk: list[str], name: str) -> float:
        src = work / f"{name}.de"
        src.write_text("\n".join(chunk) + "\n", encoding="utf-8")
        t0 = time.perf_counter()
        subprocess.run(MT + ["translate", "-c", model, "-i", str(src), "-o", str(work / f"{name}.out"),
                             "--device", device], check=True, cwd=ROOT)
        return time.perf_counter() - t0

    one = timed(lines[:1], "offline-one")
    full = timed(lines, "offline-all")
    return {"lines": len(lines), "wall_s": round(full, 2), "startup_s": round(one, 2),
            "sentences_per_s": round(len(lines) / max(full - one, 1e-9), 2),
            "sentences_per_s_with_startup": round(len(lines) / full, 2)}


def in_process(script: str, lines: list[str], path: Path, model: str, device: str, *more: str):
    """`script` run by this Python in a process of its own (`python -c script model device path *more`), with
    `lines` written to `path`: what it printed last, as JSON."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = subprocess.run([sys.executable, "-c", script, model, device, str(path), *more], check=True, cwd=ROOT,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


ALONE = r'''
import json, sys, time
from mt.tuning import tune_process
tune_process(["translate"])  # what `mt translate` sets before torch is imported
from mt.decoding.text_front_end import translate_lines
from mt.documents.text import split_text
from mt.decoding.loading import load_translator
model, device, path = sys.argv[1:4]
tr = load_translator(model, device)
lines = open(path, encoding="utf-8").read().splitlines()
translate_lines(tr, ["warm up"], tr.cfg.decode)
out = []
for line in lines:  # the sentences a one-line request becomes, decoded together as the server decodes them
    sentences = [p.text.strip() for p in split_text(line) if p.translate]
    t0 = time.perf_counter()
    translate_lines(tr, sentences, tr.cfg.decode)
    out.append(time.perf_counter() - t0)
print(json.dumps(out))
'''


def alone(model: str, lines: list[str], device: str, work: Path) -> dict:
    """Each line decoded alone in-process (the one-client latency reference)."""
    times = in_process(ALONE, lines, work / "alone.de", model, device)
    return {"lines": len(times), "p50_ms": round(1000 * statistics.median(times), 1),
            "mean_ms": round(1000 * statistics.fmean(times), 1)}


IN_FLIGHT = r'''
import itertools, json, sys, threading, time
from mt.tuning import tune_process
tune_process(["serve"])  # what `mt serve` sets before torch is imported
from mt.decoding.lines import LineBatch, LineText, encode_lines, translations
from mt.documents.text import split_text
from mt.serving.decode_thread import DecodeThread
from mt.decoding.loading import load_translator
model, device, path, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lines = open(path, encoding="utf-8").read().splitlines()
decoder = DecodeThread()
tr = decoder.call(lambda: load_translator(model, device))
worker = decoder.add_worker(tr.backend, 10 ** 9)
taken = itertools.count()  # the next dev line, shared by the client threads

def translate(line):  # what the server does with a one-line request, without HTTP
    sentences = [LineText(p.text.strip(), i) for i, p in enumerate(split_text(line)) if p.translate]
    encoded = encode_lines(tr, sentences)
    batch = LineBatch(encoded, tr.cfg.decode, 1, tr.backend.max_positions)
    hyps = batch.hypotheses(worker.submit(batch.todo).done.result())
    return translations(tr, [s.source for s in encoded], hyps, False)

def client(deadline, done):
    while time.perf_counter() < deadline:
        translate(lines[next(taken) % len(lines)])
        done.append(time.perf_counter())

for line in lines[:8]:
    translate(line)  # warm-up
rates = {}
for concurrency in [int(c) for c in sys.argv[5].split(",")]:
    done, start = [], time.perf_counter()
    threads = [threading.Thread(target=client, args=(start + seconds, done)) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rates[concurrency] = len(done) / (max(done) - start)
decoder.stop()
print(json.dumps(rates))
'''


def in_flight(model: str, lines: list[str], device: str, work: Path, seconds: float,
              concurrencies: list[int]) -> dict:
    """The server's decoding without HTTP: threads in one process each keep one dev line in flight through the
    DecodeThread and worker that `mt serve` uses (split, encode, decode, detokenize), as many as each
    concurrency, for `seconds`; dev lines per second per concurrency."""
    rates = in_process(IN_FLIGHT, lines, work / "in-flight.de", model, device, str(seconds),
                       ",".join(map(str, concurrencies)))
    return {"sentences_per_s": {int(c): round(r, 2) for c, r in rates.items()}}


# ---------------------------------------------------------------- main


def load_now() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="mt checkpoint (also exported for LibreTranslate)")
    ap.add_argument("--pair", default="de:en", help="SRC:TGT (default de:en)")
    ap.add_argument("--concurrency", default="1,8,32,128")
    ap.add_argument("--kinds", default="sentence,document", help="sentence (one dev line), document (20 lines)")
    ap.add_argument("--seconds", type=float, default=15.0, help="time each cell's clients keep sending")
    ap.add_argument("--servers", default="mt,mt-no-batching,libretranslate,offline")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--ltvenv", default=str(ROOT / ".venv-lt"), help="virtual environment with libretranslate")
    ap.add_argument("--lt-ct2-mkl", default="0", choices=["library", "0", "1"],
                    help="CT2_USE_MKL for LibreTranslate (library: CTranslate2's own choice, MKL on Intel CPUs)")
    ap.add_argument("--lt-intra-threads", type=int, default=os.cpu_count() or 1,
                    help="ARGOS_INTRA_THREADS for LibreTranslate (-1: Argos's default, 0 = CTranslate2's choice)")
    ap.add_argument("--offline-lines", type=int, default=0,
                    help="dev lines of the offline rows (0: all, the lines the clients send in turn; over 300 lines "
                         "two runs gave 99-114 and 152-194 sentences/s, over all 883 120-123 and 145-148)")
    ap.add_argument("--alone-lines", type=int, default=50)
    ap.add_argument("--timeout", type=float, default=900.0, help="a request's client timeout (then: lost)")
    ap.add_argument("--work", default=None, help="folder for logs, exports and packages (default: a temp dir)")
    ap.add_argument("--server-memory-gb", type=float, default=8.0,
                    help="address-space limit of each server process (RLIMIT_AS), so that a server that grows "
                         "fails alone instead of the machine running out of memory; 0: none")
    ap.add_argument("--json", action="store_true", help="also print every measurement as one JSON line")
    args = ap.parse_args()

    Proc.memory_gb = args.server_memory_gb
    source, target = args.pair.split(":")
    pair = (source, target)
    model = str(Path(args.model).resolve())
    lines = [line for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    kinds = args.kinds.split(",")
    servers = args.servers.split(",")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-serve-"))
    work.mkdir(parents=True, exist_ok=True)
    results, notes = [], []

    def emit(row: dict) -> None:
        results.append(row)
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"  {row}", file=sys.stderr, flush=True)

    launcher = None
    if "libretranslate" in servers:
        try:
            launcher = prepare_lt(model, pair, Path(args.ltvenv), args.device, work)
        except Exception as e:  # row (c) left out, with the reason
            notes.append(f"libretranslate left out: {type(e).__name__}: {e}")
            print(notes[-1], file=sys.stderr)
            servers = [s for s in servers if s != "libretranslate"]

    for rnd in range(args.rounds):
        for server in servers:
            if server == "offline-export":
                emit({"round": rnd, "server": server, "load": load_now(),
                      **offline(str(exported(model, work)), lines[:args.offline_lines or None], args.device, work)})
                continue
            if server == "offline":
                row = {"round": rnd, "server": "offline", "load": load_now(),
                       **offline(model, lines[:args.offline_lines or None], args.device, work)}
                emit(row)
                row = {"round": rnd, "server": "alone", "load": load_now(),
                       **alone(model, lines[:args.alone_lines], args.device, work)}
                emit(row)
                row = {"round": rnd, "server": "in-flight", "load": load_now(),
                       **in_flight(model, lines, args.device, work, args.seconds, concurrencies)}
                emit(row)
                continue
            try:
                if server == "libretranslate":
                    proc, url = start_lt(launcher, pair, Path(args.ltvenv), args.device, work,
                                          args.lt_intra_threads if args.lt_intra_threads >= 0 else None,
                                          args.lt_ct2_mkl)
                else:
                    served = str(exported(model, work)) if server.startswith("mt-export") else model
                    parallel = (os.cpu_count() or 1) if server in ("mt-export-parallel", "mt-export-int8") else 1
                    proc, url = start_mt(served, pair, not server.endswith("no-batching"), args.device, work,
                                         server, parallel, "int8" if server.endswith("-int8") else None)
            except Exception as e:
                notes.append(f"{server} round {rnd}: did not start: {e}")
                print(notes[-1], file=sys.stderr)
                continue
            try:
                asyncio.run(run_cell(url, source, target, lines, "sentence", 4, 2.0, args.timeout))  # warm-up
                for kind in kinds:
                    for c in concurrencies:
                        load = load_now()
                        cell = asyncio.run(run_cell(url, source, target, lines, kind, c, args.seconds,
                                                    args.timeout, proc.proc.pid))
                        emit({"round": rnd, "server": server, "load": load, **cell})
                        if proc.proc.poll() is not None:
                            notes.append(f"{server} exited with {proc.proc.returncode} during {kind} x{c}")
                            break
            finally:
                rc = proc.stop()
                if server.startswith("mt") and rc not in (0, None, -15):
                    notes.append(f"{server}: exit status {rc} after SIGTERM (log: {proc.log})")

    print_table(results, notes, work)


def print_table(results: list[dict], notes: list[str], work: Path) -> None:
    cells = [r for r in results if "kind" in r]
    print("| server | requests | clients | sentences/s | p50 ms | p95 ms | p99 ms | errors | 503 | lost | server RSS MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in cells:
        print(f"| {r['server']} | {r['kind']} | {r['concurrency']} | {r['sentences_per_s']:.1f} | "
              f"{r['p50_ms']:.0f} | {r['p95_ms']:.0f} | {r['p99_ms']:.0f} | {r['errors']} | {r.get('refused_503', '')} | {r['lost']} | "
              f"{r.get('server_rss_mb', '')} |")
    for r in results:
        if r["server"].startswith("offline"):
            print(f"| {r['server']} `mt translate` | {r['lines']} lines | - | {r['sentences_per_s']:.1f} "
                  f"({r['sentences_per_s_with_startup']:.1f} with start-up) | | | | | |")
        if r["server"] == "alone":
            print(f"| in-process, one line alone | {r['lines']} lines | 1 | - | {r['p50_ms']:.0f} | | | | |")
        if r["server"] == "in-flight":
            for c, rate in r["sentences_per_s"].items():
                print(f"| in-process, no HTTP | sentence | {c} | {rate:.1f} | | | | | |")
    for r in cells:
        for s in r["samples"]:
            print(f"sample ({r['server']} {r['kind']} x{r['concurrency']}): {s}")
    for note in notes:
        print(f"note: {note}")
    print(f"logs and exports: {work}")


if __name__ == "__main__":
    main()
