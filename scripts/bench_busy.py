"""mt's commands on an idle machine and beside CPU-bound work, at mt's own OpenMP waiting policy and the others.

    python scripts/bench_busy.py --checkpoint CKPT [--loads 0,1,2] [--settings mt,30000,0,0-fewer-threads]
        [--commands translate,translate-export,...] [--lines 50] [--rounds 1] [--json FILE]

For each number of busy processes (`--loads`: each a torch process multiplying 512 x 512 matrices on two threads, as
another training or decoding job would, started before the command and stopped after it), each command runs once
per setting, in a fresh process, timed from outside (start-up and model loading included):
- `mt`: nothing set, mt's own choice (mt/tuning.py: GOMP_SPINCOUNT from the load it samples at start);
- `30000`, `300000`, `0`: GOMP_SPINCOUNT set to that; `passive`: OMP_WAIT_POLICY=PASSIVE;
- `0-fewer-threads`: GOMP_SPINCOUNT=0 with one thread less than the cores (OMP_NUM_THREADS);
- `before`: what mt set before it sampled the load: 30000, and GNU's 300,000 for training.
The commands: `translate` (the checkpoint, beam 4, the first `--lines` dev lines), `translate-int8` (the same with
`--quantize int8`), `translate-export` and `translate-export-int8` (its CTranslate2 export), `score` (300 dev
pairs, teacher forcing), `train` (`mt bench train` of the demo config, 20 updates) and `serve-1`, `serve-32` (`mt
serve` of the checkpoint, then 64 one-line requests from 1 or 32 clients; timed from the first request to the last
answer). Each row prints the seconds per setting, mt's time against the best setting of that row, and the
GOMP_SPINCOUNT mt chose there (from its `--debug` tuning line).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE, REFERENCE = ROOT / "data/ddtp-de-en/dev.de", ROOT / "data/ddtp-de-en/dev.en"
CORES = os.cpu_count() or 1
SETTINGS = {"mt": {}, "before": "before", "30000": {"GOMP_SPINCOUNT": "30000"},
            "300000": {"GOMP_SPINCOUNT": "300000"}, "0": {"GOMP_SPINCOUNT": "0"},
            "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
            "0-fewer-threads": {"GOMP_SPINCOUNT": "0", "OMP_NUM_THREADS": str(max(1, CORES - 1))}}
BUSY = ("import time, torch\ntorch.set_num_threads(2)\na = torch.randn(512, 512)\nend = time.time() + 900\n"
        "while time.time() < end:\n    a = (a @ a).clamp_(-1, 1)\n")


def mt_command(*args) -> list[str]:
    return [sys.executable, "-m", "mt", "--debug", *map(str, args)]


def environment(setting: str, command: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    extra = SETTINGS[setting]
    if extra == "before":
        extra = {"GOMP_SPINCOUNT": "300000" if command == "train" else "30000"}
    return {**env, **extra}


CHOSEN: dict[str, str] = {}  # row -> the spin count mt chose there (its --debug tuning line)


def timed(argv: list[str], env: dict) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    seconds = time.perf_counter() - start
    CHOSEN["last"] = spin_count_chosen(proc.stderr)
    return seconds


def spin_count_chosen(stderr: str) -> str:
    """GOMP_SPINCOUNT from a `tuning:` line (`--debug`), or `-` where the command printed none or left it."""
    line = next((line for line in stderr.splitlines() if line.startswith("tuning: ")), "")
    return next((part.split("=")[1] for part in line.removeprefix("tuning: ").split(", ")
                 if part.startswith("GOMP_SPINCOUNT=")), "-")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def served(checkpoint: Path, clients: int, lines: list[str], env: dict) -> float:
    """Seconds from the first of 64 one-line requests to the last answer, from `clients` clients at once."""
    import httpx

    port = free_port()
    log = tempfile.TemporaryFile("w+")
    server = subprocess.Popen(mt_command("serve", "-m", f"de:en={checkpoint}", "--port", port), env=env, cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=log, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(timeout=300) as http:
            for _ in range(600):
                try:
                    if http.get(f"{url}/languages").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.2)
            requests = [lines[i % len(lines)] for i in range(64)]

            def one(line: str) -> None:
                answer = http.post(f"{url}/translate", json={"q": line, "source": "de", "target": "en"})
                answer.raise_for_status()

            start = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                list(pool.map(one, requests))
            return time.perf_counter() - start
    finally:
        server.terminate()
        server.wait(timeout=60)
        log.seek(0)
        CHOSEN["last"] = spin_count_chosen(log.read())
        log.close()


def run(command: str, setting: str, models: dict, files: dict, lines: list[str]) -> float:
    env = environment(setting, command)
    translate = ["translate", "-i", files["source"], "-o", files["output"], "--beam-size", "4"]
    argv = {"translate": [*translate, "-c", models["checkpoint"]],
            "translate-int8": [*translate, "-c", models["checkpoint"], "--quantize", "int8"],
            "translate-export": [*translate, "-c", models["export"]],
            "translate-export-int8": [*translate, "-c", models["export"], "--quantize", "int8"],
            "score": ["score", "-c", models["checkpoint"], "--src", files["score_src"], "--tgt", files["score_tgt"],
                      "-o", files["output"]],
            "train": ["bench", "train", ROOT / "configs/demo.yaml", "--steps", "20", "--warmup", "2",
                      "--set", f"output_dir={files['train']}", "--set", "train.device=cpu"]}
    if command.startswith("serve-"):
        return served(models["checkpoint"], int(command.split("-")[1]), lines, env)
    return timed(mt_command(*argv[command]), env)


def busy(count: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(count)]
    time.sleep(2 if count else 0)  # past their start-up, at full load
    return procs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, required=True)
    ap.add_argument("--loads", default="0,1,2", help="busy processes beside each command")
    ap.add_argument("--settings", default="mt,before,0,0-fewer-threads", help=", ".join(SETTINGS))
    ap.add_argument("--commands", default="translate,translate-int8,translate-export,translate-export-int8,score,"
                                          "train,serve-1,serve-32")
    ap.add_argument("--lines", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=1, help="the best of this many runs per cell")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    settings, commands = args.settings.split(","), args.commands.split(",")
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        files = {"source": work / "source.de", "output": work / "out", "score_src": work / "score.de",
                 "score_tgt": work / "score.en", "train": work / "train"}
        files["source"].write_text("\n".join(lines[:args.lines]) + "\n", encoding="utf-8")
        files["score_src"].write_text("\n".join(lines[:300]) + "\n", encoding="utf-8")
        files["score_tgt"].write_text("\n".join(REFERENCE.read_text(encoding="utf-8").splitlines()[:300]) + "\n",
                                      encoding="utf-8")
        models = {"checkpoint": args.checkpoint.resolve(), "export": work / "export"}
        subprocess.run(mt_command("export", "-c", models["checkpoint"], "-o", models["export"]), check=True,
                       cwd=ROOT, stdout=subprocess.DEVNULL)
        print(f"| command | busy processes | {' | '.join(settings)} | mt / best | mt chose |")
        print("|---|---|" + "---:|" * (len(settings) + 2), flush=True)
        for load in map(int, args.loads.split(",")):
            for command in commands:
                row = results.setdefault(f"{command} | {load} busy", {})
                for setting in [s for _ in range(args.rounds) for s in settings]:  # settings take turns
                    procs = busy(load)
                    try:
                        seconds = run(command, setting, models, files, lines[:args.lines])
                    finally:
                        for p in procs:
                            p.kill()
                            p.wait()
                    row[setting] = min(row.get(setting, float("inf")), seconds)
                    if setting == "mt":
                        row["mt chose"] = CHOSEN["last"]
                print(line_of(f"{command} | {load} busy", row, settings), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1), encoding="utf-8")


def line_of(name: str, row: dict, settings: list[str]) -> str:
    best = min(row[s] for s in settings)
    cells = " | ".join(f"{row[s]:.1f}" for s in settings)
    return f"| {name} | {cells} | {row.get('mt', float('nan')) / best:.2f}x | {row.get('mt chose', '')} |"


if __name__ == "__main__":
    main()
