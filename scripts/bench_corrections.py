"""The correction loop, simulated: users post-edit a served model's translations of strings of a domain it never
saw, `mt adapt` learns from their corrections after every round, and the server swaps the adapted model in.

    python scripts/bench_corrections.py [--model runs/demo/checkpoint_best.pt] [--wheels DIR] [--rounds 5]
                                        [--per-round 100] [--steps 100] [--out runs/bench-corrections]

The strings are Django's German catalogues (`pip download django==5.2.19` into --wheels when it is not there, as
scripts/bench_catalogues.py does), de->en, shuffled once (seed 1): --rounds rounds of --per-round strings, and the
rest held out. A real `mt serve --suggestions` process serves the model. Each round:

1. the round's strings are translated through `/translate` (20 a request, as Weblate sends them): chrF of what
   the current model says, before any correction of those strings;
2. a translator corrects every one (`POST /suggest` with the catalogue's English) and `/translate` of the same
   strings is checked to return the corrections (the memory);
3. the suggestions so far are exported (`mt suggestions export`) and `mt adapt` fine-tunes the served model on them,
   --steps updates, replaying its own training corpus and checking the shipped dev set;
4. unless mt adapt refused it, the adapted checkpoint is moved onto the served file and the server gets SIGHUP
   while four clients keep translating: every request must be answered with 200.

It prints one line per round and the held-out strings' chrF before and after; with --poison, one more round in
which the "corrections" are other strings' translations, adapted with --unreviewed, to show what the dev check
sees of it. Runs on the CPU in about 2 minutes a round with `make demo`'s model.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import sacrebleu

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_catalogues import catalogues, strings  # noqa: E402

DEV = ROOT / "data" / "ddtp-de-en"
PER_REQUEST = 20


class Server:
    """`mt serve -m de:en=MODEL --suggestions DB` as a process on a free port, its log kept."""

    def __init__(self, model: Path, database: Path):
        self.proc = subprocess.Popen([sys.executable, "-m", "mt", "serve", "-m", f"de:en={model}", "--port", "0",
                                      "--suggestions", str(database)], stderr=subprocess.PIPE, text=True, cwd=ROOT)
        self.log: list[str] = []
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        while not any("ready at" in line for line in self.log):
            if self.proc.poll() is not None:
                sys.exit("mt serve did not start:\n" + "".join(self.log))
            time.sleep(0.1)
        self.url = re.search(r"ready at (\S+)", "".join(self.log)).group(1).rstrip("/")

    def post(self, path: str, body: dict, timeout: float = 60) -> dict:
        request = urllib.request.Request(self.url + path, json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read())

    def translate(self, texts: list[str]) -> list[str]:
        out = []
        for i in range(0, len(texts), PER_REQUEST):
            out += self.post("/translate", {"q": texts[i:i + PER_REQUEST], "source": "de",
                                            "target": "en"})["translatedText"]
        return out

    def swap(self, adapted: Path, served: Path, probe: list[str]) -> tuple[int, int, float]:
        """The adapted model moved onto the served file and SIGHUP sent while four clients translate: (requests,
        failed, slowest seconds)."""
        results, stop = [], threading.Event()

        def client(k: int):
            while not stop.is_set():
                started = time.monotonic()
                try:
                    self.post("/translate", {"q": probe[k % len(probe)], "source": "de", "target": "en"})
                    results.append((True, time.monotonic() - started))
                except Exception:  # a request the swap broke
                    results.append((False, time.monotonic() - started))

        threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(4)]
        for t in threads:
            t.start()
        time.sleep(1)
        reloads = sum("reloaded de-en" in line for line in self.log)
        adapted.replace(served)
        self.proc.send_signal(signal.SIGHUP)
        while sum("reloaded de-en" in line for line in self.log) == reloads:
            if any("reload failed" in line for line in self.log):
                sys.exit("".join(self.log))
            time.sleep(0.1)
        time.sleep(1)
        stop.set()
        for t in threads:
            t.join()
        return len(results), sum(not ok for ok, _ in results), max(s for _, s in results)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def mt(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mt", *map(str, args)], check=True, capture_output=True,
                          text=True, cwd=ROOT)


def chrf(hypotheses: list[str], references: list[str]) -> float:
    return sacrebleu.corpus_chrf(hypotheses, [references]).score


def adapted(served: Path, database: Path, out: Path, steps: int, unreviewed: bool = False) -> tuple[Path, float,
                                                                                                     str, bool]:
    """`mt adapt` on every suggestion so far: (the adapted checkpoint, seconds, its dev BLEU line, written)."""
    corrections, target = (database, out / "adapted.pt") if unreviewed else (out / "reviewed.tmx", out / "adapted.pt")
    if not unreviewed:
        corrections.unlink(missing_ok=True)
        mt("suggestions", "export", database, "-o", corrections)
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "mt", "adapt", "-c", served, "--corrections", corrections,
                           "--src-lang", "de", "--tgt-lang", "en", "--dev-src", DEV / "dev.de", "--dev-ref",
                           DEV / "dev.en", "--steps", str(steps), "-o", target,
                           *(["--unreviewed"] if unreviewed else [])], capture_output=True, text=True, cwd=ROOT)
    seconds = time.monotonic() - started
    line = next((line for line in proc.stderr.splitlines() if "dev BLEU" in line), proc.stderr.strip())
    if proc.returncode != 0 and "loses" not in proc.stderr:
        sys.exit(proc.stderr)
    return target, seconds, line.split("adapt: ")[-1], proc.returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=ROOT / "runs" / "demo" / "checkpoint_best.pt")
    parser.add_argument("--wheels", type=Path, default=ROOT / "runs" / "wheels")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--per-round", type=int, default=100)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--poison", action="store_true")
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "bench-corrections")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    args.wheels.mkdir(parents=True, exist_ok=True)
    found = catalogues(args.wheels, args.out)
    src, ref, _ = strings(found["django"], args.out / "django")
    pairs = list(zip(src.read_text(encoding="utf-8").splitlines(), ref.read_text(encoding="utf-8").splitlines()))
    pairs = list(dict(pairs).items())  # one correction per source string
    random.Random(1).shuffle(pairs)
    n = args.rounds * args.per_round
    rounds = [pairs[i:i + args.per_round] for i in range(0, n, args.per_round)]
    held = pairs[n:]
    served, database = args.out / "served.pt", args.out / "suggestions.db"
    shutil.copy(args.model, served)
    server = Server(served, database)
    results = {"strings": len(pairs), "held_out": len(held), "rounds": []}
    try:
        held_before = chrf(server.translate([s for s, _ in held]), [t for _, t in held])
        print(f"Django de->en: {len(pairs)} distinct strings, {args.rounds} rounds of {args.per_round}, "
              f"{len(held)} held out; {args.steps} updates of mt adapt a round")
        print("| round | suggestions | chrF before correction | memory answers | dev BLEU (adapt) | adapt s | "
              "requests during swap | failed | slowest s |\n|---|---|---|---|---|---|---|---|---|")
        for r, batch in enumerate(rounds, 1):
            sources, corrections = [s for s, _ in batch], [t for _, t in batch]
            before = chrf(server.translate(sources), corrections)
            for s, t in batch:
                server.post("/suggest", {"q": s, "s": t, "source": "de", "target": "en"})
            remembered = sum(a == t for a, t in zip(server.translate(sources), corrections))
            checkpoint, seconds, line, written = adapted(served, database, args.out, args.steps)
            requests, failed, slowest = server.swap(checkpoint, served, [s for s, _ in held[:20]]) if written else \
                (0, 0, 0.0)  # refused: the served model stays
            line += "" if written else "; refused, not swapped"
            results["rounds"].append({"round": r, "chrf_before": round(before, 2), "remembered": remembered,
                                      "adapt": line, "adapt_s": round(seconds, 1), "requests": requests,
                                      "failed": failed, "slowest_s": round(slowest, 2)})
            print(f"| {r} | {r * args.per_round} | {before:.2f} | {remembered}/{len(batch)} | {line} | "
                  f"{seconds:.0f} | {requests} | {failed} | {slowest:.2f} |", flush=True)
        held_after = chrf(server.translate([s for s, _ in held]), [t for _, t in held])
        results.update(held_chrf_before=round(held_before, 2), held_chrf_after=round(held_after, 2))
        print(f"held-out strings ({len(held)}): chrF {held_before:.2f} before any correction, {held_after:.2f} after "
              f"{n} (the next round's strings)")
        if args.poison:
            poison = pairs[:args.per_round]  # already corrected strings, "corrected" again into others' English
            for (s, _), (_, wrong) in zip(poison, poison[1:] + poison[:1]):
                server.post("/suggest", {"q": s, "s": wrong, "source": "de", "target": "en"})
            _, seconds, line, written = adapted(served, database, args.out, args.steps, unreviewed=True)
            results["poison"] = {"adapt": line, "written": written}
            print(f"poisoned: {args.per_round} wrong corrections, mt adapt --unreviewed: {line}; "
                  f"{'written' if written else 'refused'}")
    finally:
        server.stop()
    (args.out / "results.json").write_text(json.dumps(results, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
