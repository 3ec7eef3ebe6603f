"""Memory of `mt serve` across rounds of sustained load: the server's resident memory before each round, its peak
during it, at its last answer and `--settle` seconds later, with the requests answered per second.

    python scripts/bench_serve_memory.py --model CKPT_OR_EXPORT [--pair de:en] [--clients 128] [--seconds 30]
        [--rounds 3] [--settle 3] [--lines 1] [-- extra mt serve options]

Each of `--clients` closed-loop clients (aiohttp, one process) sends LibreTranslate's `POST /translate` with
`--lines` dev lines joined by newlines, the next as soon as the last is answered, for `--seconds`; requests in
flight then are waited for. Lines come in turn from data/ddtp-de-en/dev.de.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT / "data" / "ddtp-de-en" / "dev.de"


def resident_mb(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1)) / 1024


def start_server(model: str, pair: str, extra: list[str]) -> tuple[subprocess.Popen, str]:
    source, target = pair.split(":")
    proc = subprocess.Popen([sys.executable, "-m", "mt", "serve", "-m", f"{source}:{target}={model}", "--port", "0",
                             "--max-queued-tokens", "10000000", *extra], cwd=ROOT, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if match := re.search(r"ready at (http://\S+)", line):
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, match.group(1)
    raise SystemExit(f"mt serve ended before it was ready (exit {proc.wait()})")


async def load(url: str, pair: str, texts, clients: int, seconds: float) -> tuple[int, int]:
    """(requests answered 200, other answers) of `clients` closed-loop clients over `seconds`."""
    source, target = pair.split(":")
    deadline, counts = time.monotonic() + seconds, [0, 0]

    async def client(http):
        while time.monotonic() < deadline:
            async with http.post(url + "/translate", json={"q": next(texts), "source": source,
                                                           "target": target}) as response:
                await response.read()
                counts[response.status != 200] += 1
    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=900)) as http:
        await asyncio.gather(*(client(http) for _ in range(clients)))
    return counts[0], counts[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--pair", default="de:en")
    ap.add_argument("--clients", type=int, default=128)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--settle", type=float, default=3.0)
    ap.add_argument("--lines", type=int, default=1, help="dev lines per request")
    args, extra = ap.parse_known_args()
    dev = [line for line in DEV.read_text(encoding="utf-8").splitlines() if line.strip()]
    texts = ("\n".join(dev[i:i + args.lines]) for i in itertools.cycle(range(0, len(dev) - args.lines, args.lines)))
    proc, url = start_server(args.model, args.pair, [e for e in extra if e != "--"])
    try:
        print("round  answered  errors  req/s  start_MB  peak_MB  end_MB  settled_MB")
        for number in range(1, args.rounds + 1):
            start, peak, sampling = resident_mb(proc.pid), [0.0], [True]

            def sample():
                while sampling[0]:
                    peak[0] = max(peak[0], resident_mb(proc.pid))
                    time.sleep(0.1)
            sampler = threading.Thread(target=sample)
            sampler.start()
            began = time.monotonic()
            answered, errors = asyncio.run(load(url, args.pair, texts, args.clients, args.seconds))
            took, end = time.monotonic() - began, resident_mb(proc.pid)
            sampling[0] = False
            sampler.join()
            time.sleep(args.settle)
            print(f"{number:5d}  {answered:8d}  {errors:6d}  {answered / took:5.1f}  {start:8.0f}  {peak[0]:7.0f}  "
                  f"{end:6.0f}  {resident_mb(proc.pid):10.0f}", flush=True)
    finally:
        proc.terminate()
        proc.wait(timeout=120)


if __name__ == "__main__":
    main()
