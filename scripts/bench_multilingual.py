"""One multilingual model against four bilingual ones on the shipped DDTP corpora (docs/multilingual.md).

    python scripts/bench_multilingual.py [--work runs/bench-multilingual] [--updates 1200] [--heldout 800]
        [--stages data,train,curves,evaluate,serve] [--token both] [--eval-every 400] [--dev-lines 200]
        [--serve-seconds 30] [--clients 32]

data: English sentences that both corpora hold (data/ddtp-de-en, data/ddtp-fr-en) are taken from the end of the
de-en training file until --heldout of them; every training pair of either corpus whose English side is one of
them is held out. The held-out pairs are the test sets of de->en, en->de, fr->en and en->fr, and joined through
their English side, of de->fr and fr->de (evaluation only: no German-French pair is ever trained on).
train: one model on the four directions (configs/demo.yaml's shape, 4 x --updates updates, a joint vocabulary of
6,000 for three languages, languages.token --token) and four bilingual models of the same shape (--updates each,
the demo's 4,000), each with `mt train`, timed; each model is evaluated on the first --dev-lines pairs of the
shipped dev set of each of its directions every --eval-every updates of the multilingual model (every quarter of
that for a bilingual one: at equal pairs per direction).
curves: each model's dev loss and greedy BLEU per direction at each evaluation, from its metrics.jsonl.
evaluate: beam 4 (the demo's decode section) on each test set: BLEU (sacrebleu), and the share of outputs that
mt clean's language identifier (fastText lid.176, choosing among de, en, fr) puts in the requested language; for
de->fr and fr->de, the multilingual model asked directly (zero-shot) and pivoting through English, and the
bilingual models pivoting.
serve: --clients closed-loop clients, spread evenly over the four directions, each sending one held-out
sentence per request to `mt serve` (LibreTranslate's /translate) for --serve-seconds: the multilingual model
behind `-m CKPT` against the four bilingual ones behind `-m de:en=A -m en:de=B ...`. Sentences per second.

Stages keep their results in WORK/results.json, so each one can be run again alone; the train stage skips the
models it has trained before (delete WORK/results.json, or a model's folder, to train it again).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mt.data.language_id import detect_languages  # noqa: E402
from mt.training.corpus_scores import score_corpus  # noqa: E402

MT = [sys.executable, "-m", "mt"]
CORPORA = {"de": ROOT / "data" / "ddtp-de-en", "fr": ROOT / "data" / "ddtp-fr-en"}
DIRECTIONS = [("de", "en"), ("en", "de"), ("fr", "en"), ("en", "fr")]
ZERO_SHOT = [("de", "fr"), ("fr", "de")]


def read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def write(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return str(path)


# ---------------------------------------------------------------- data


def make_data(work: Path, heldout: int) -> None:
    folder = work / "data"
    folder.mkdir(parents=True, exist_ok=True)
    pairs = {x: list(zip(read(CORPORA[x] / f"train.{x}"), read(CORPORA[x] / "train.en"))) for x in CORPORA}
    french_of = {en: fr for fr, en in pairs["fr"]}
    held: dict[str, tuple[str, str]] = {}  # English -> (German, French), from the end of de-en
    for de, en in reversed(pairs["de"]):
        if en in french_of and en not in held:
            held[en] = (de, french_of[en])
            if len(held) == heldout:
                break
    held_en = list(held)
    for x in CORPORA:
        kept = [(s, en) for s, en in pairs[x] if en not in held]
        write(folder / f"train.{x}-en.{x}", [s for s, _ in kept])
        write(folder / f"train.{x}-en.en", [en for _, en in kept])
        print(f"data: {x}-en {len(kept)} training pairs ({len(pairs[x]) - len(kept)} held out)")
    sides = {"en": held_en, "de": [held[en][0] for en in held_en], "fr": [held[en][1] for en in held_en]}
    for lang, lines in sides.items():
        write(folder / f"test.{lang}", lines)
    print(f"data: {len(held_en)} held-out English sentences with their German and French")


# ---------------------------------------------------------------- configs and training


def demo() -> dict:
    return yaml.safe_load((ROOT / "configs" / "demo.yaml").read_text(encoding="utf-8"))


def train_files(work: Path, source: str, target: str) -> tuple[str, str]:
    x = source if target == "en" else target
    base = work / "data" / f"train.{x}-en"
    return f"{base}.{source}", f"{base}.{target}"


def dev_files(work: Path, source: str, target: str, lines: int) -> tuple[str, str]:
    """The first `lines` pairs of the shipped dev set of source->target, written into WORK/data/dev."""
    x = source if target == "en" else target
    folder = work / "data" / "dev"
    folder.mkdir(parents=True, exist_ok=True)
    return tuple(write(folder / f"{source}-{target}.{lang}", read(CORPORA[x] / f"dev.{lang}")[:lines])
                 for lang in (source, target))


def multilingual_config(work: Path, updates: int, token: str, eval_every: int, dev_lines: int) -> Path:
    cfg = demo()
    cfg["output_dir"] = str(work / "multilingual")
    cfg["data"] = {"max_len": 128,
                   "train": [dict(zip(("src", "tgt"), train_files(work, s, t)), src_lang=s, tgt_lang=t)
                             for s, t in DIRECTIONS],
                   "dev": [dict(zip(("src", "tgt"), dev_files(work, s, t, dev_lines)), src_lang=s, tgt_lang=t)
                           for s, t in DIRECTIONS]}
    cfg["tokenizer"]["vocab_size"] = 6000
    cfg["languages"] = {"token": token}
    cfg["train"].update(max_steps=4 * updates, eval_every=eval_every, save_every=4 * updates)
    path = work / "multilingual.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def bilingual_config(work: Path, updates: int, source: str, target: str, eval_every: int, dev_lines: int) -> Path:
    cfg = demo()
    cfg["output_dir"] = str(work / f"{source}-{target}")
    (src, tgt), (dev_src, dev_tgt) = train_files(work, source, target), dev_files(work, source, target, dev_lines)
    cfg["data"].update(train_src=src, train_tgt=tgt, dev_src=dev_src, dev_tgt=dev_tgt, src_lang=source,
                       tgt_lang=target)
    cfg["train"].update(max_steps=updates, eval_every=max(eval_every // 4, 1), save_every=updates)
    path = work / f"{source}-{target}.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def train(work: Path, updates: int, results: dict, token: str, eval_every: int, dev_lines: int) -> None:
    """Each model trained and timed in turn; results.json gets each one's line as soon as it is trained."""
    runs = {"multilingual": multilingual_config(work, updates, token, eval_every, dev_lines)}
    runs.update({f"{s}-{t}": bilingual_config(work, updates, s, t, eval_every, dev_lines) for s, t in DIRECTIONS})
    for name, config in runs.items():
        if name in results.get("train", {}) and checkpoint(work, name).is_file():
            print(f"train: {name} trained before ({results['train'][name]['seconds']} s), kept")
            continue
        start = time.perf_counter()
        proc = subprocess.run([*MT, "train", str(config), "--restart"], cwd=ROOT, capture_output=True, text=True)
        if proc.returncode:
            sys.exit(f"mt train {config}: {proc.stderr[-2000:]}")
        seconds = time.perf_counter() - start
        last = [line for line in proc.stderr.splitlines() if "dev loss" in line][-1]
        results.setdefault("train", {})[name] = {"seconds": round(seconds, 1), "dev": last}
        print(f"train: {name} {seconds:.0f} s; {last}")
        (work / "results.json").write_text(json.dumps(results, indent=1))


def curves(work: Path, results: dict) -> None:
    """Each trained model's dev loss and greedy BLEU per direction at each evaluation (its metrics.jsonl)."""
    for name in ["multilingual", *(f"{s}-{t}" for s, t in DIRECTIONS)]:
        metrics = work / name / "metrics.jsonl"
        if not metrics.is_file():
            continue
        rows = [row for row in map(json.loads, metrics.read_text().splitlines()) if row["split"] == "dev"]
        results.setdefault("curves", {})[name] = [
            {"step": row["step"], "loss": row["loss"],
             **{key.removeprefix("bleu_"): round(value, 2) for key, value in row.items() if key.startswith("bleu")}}
            for row in rows]
        for row in results["curves"][name]:
            print(f"curves: {name} " + " ".join(f"{key} {value}" for key, value in row.items()))


# ---------------------------------------------------------------- evaluation


def checkpoint(work: Path, name: str) -> Path:
    return work / name / "checkpoint_last.pt"


def translate(model: Path, lines: list[str], *options: str) -> list[str]:
    proc = subprocess.run([*MT, "translate", "-c", str(model), *options], cwd=ROOT, capture_output=True, text=True,
                          input="".join(line + "\n" for line in lines))
    if proc.returncode:
        sys.exit(f"mt translate -c {model}: {proc.stderr[-2000:]}")
    return proc.stdout.splitlines()


def scores(outputs: list[str], references: list[str], target: str) -> dict:
    bleu = score_corpus(outputs, references, ["bleu"])["bleu"]["score"]
    found = detect_languages(outputs, {"de", "en", "fr"})
    return {"bleu": round(bleu, 2), "in_language": round(sum(f == target for f in found) / len(found), 3)}


def evaluate(work: Path, results: dict) -> None:
    test = {lang: read(work / "data" / f"test.{lang}") for lang in ("de", "en", "fr")}
    multi = checkpoint(work, "multilingual")
    table = results.setdefault("evaluate", {})
    for s, t in DIRECTIONS:
        table[f"{s}-{t}"] = {
            "multilingual": scores(translate(multi, test[s], "--target-lang", t), test[t], t),
            "bilingual": scores(translate(checkpoint(work, f"{s}-{t}"), test[s]), test[t], t)}
        print(f"evaluate: {s}-{t} {table[f'{s}-{t}']}")
    for s, t in ZERO_SHOT:
        direct = translate(multi, test[s], "--target-lang", t)
        english = translate(multi, test[s], "--target-lang", "en")
        pivot = translate(multi, english, "--source-lang", "en", "--target-lang", t)
        bilingual = translate(checkpoint(work, f"en-{t}"), translate(checkpoint(work, f"{s}-en"), test[s]))
        table[f"{s}-{t}"] = {"multilingual zero-shot": scores(direct, test[t], t),
                             "multilingual pivot": scores(pivot, test[t], t),
                             "bilingual pivot": scores(bilingual, test[t], t)}
        print(f"evaluate: {s}-{t} {table[f'{s}-{t}']}")


# ---------------------------------------------------------------- serving


def start_server(models: list[str], log: Path) -> tuple[subprocess.Popen, str]:
    argv = [*MT, "serve", "--port", "0"] + [a for m in models for a in ("-m", m)]
    proc = subprocess.Popen(argv, cwd=ROOT, stderr=open(log, "w"), stdout=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline:
        if match := re.search(r"ready at (\S+)", log.read_text()):
            return proc, match.group(1)
        if proc.poll() is not None:
            sys.exit(f"mt serve ended: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    proc.kill()
    sys.exit(f"mt serve not ready: {log.read_text()[-2000:]}")


def load(url: str, test: dict[str, list[str]], clients: int, seconds: float) -> dict:
    """Closed-loop clients, client i on direction i mod 4, each sending the next held-out sentence as soon as its
    previous request is answered; sentences per second over the time to the last answer."""
    done, errors, start = [], [], time.perf_counter()

    def client(i: int) -> None:
        source, target = DIRECTIONS[i % len(DIRECTIONS)]
        lines, k = test[source], i
        with httpx.Client(timeout=120) as http:
            while time.perf_counter() < start + seconds:
                answer = http.post(url + "/translate", json={"q": lines[k % len(lines)], "source": source,
                                                             "target": target})
                (done if answer.status_code == 200 else errors).append(time.perf_counter())
                k += clients
    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"sentences_per_s": round(len(done) / (max(done) - start), 2), "errors": len(errors)}


def serve(work: Path, results: dict, clients: int, seconds: float) -> None:
    test = {lang: read(work / "data" / f"test.{lang}") for lang in ("de", "en", "fr")}
    setups = {"multilingual": [str(checkpoint(work, "multilingual"))],
              "four bilingual": [f"{s}:{t}={checkpoint(work, f'{s}-{t}')}" for s, t in DIRECTIONS]}
    for name, models in setups.items():
        proc, url = start_server(models, work / f"serve-{name.replace(' ', '-')}.log")
        try:
            load(url, test, clients, 3)  # warm-up
            results.setdefault("serve", {})[name] = load(url, test, clients, seconds)
        finally:
            proc.terminate()
            proc.wait(60)
        print(f"serve: {name} {results['serve'][name]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "bench-multilingual")
    parser.add_argument("--updates", type=int, default=1200)
    parser.add_argument("--heldout", type=int, default=800)
    parser.add_argument("--stages", default="data,train,curves,evaluate,serve")
    parser.add_argument("--token", default="both", choices=["target", "both"],
                        help="the multilingual model's languages.token")
    parser.add_argument("--eval-every", type=int, default=400)
    parser.add_argument("--dev-lines", type=int, default=200)
    parser.add_argument("--serve-seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=32)
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    record = args.work / "results.json"
    results = json.loads(record.read_text()) if record.exists() else {}
    steps = {"data": lambda: make_data(args.work, args.heldout),
             "train": lambda: train(args.work, args.updates, results, args.token, args.eval_every, args.dev_lines),
             "curves": lambda: curves(args.work, results),
             "evaluate": lambda: evaluate(args.work, results),
             "serve": lambda: serve(args.work, results, args.clients, args.serve_seconds)}
    for stage in args.stages.split(","):
        steps[stage]()
        record.write_text(json.dumps(results, indent=1))  # each stage's results kept as soon as it ends
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
