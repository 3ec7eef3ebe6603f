"""Decoding speed against CTranslate2 called the way its documentation calls it, on the shipped dev set.

    python scripts/bench_decode.py --model runs/a.pt --model runs/b.pt [--beams 1,4] [--repeat 2] [--limit N]
        [--device cuda] [--ct2-mkl library|0|1]

Each model is exported once with `mt export` (float32, a temporary directory). Then, per model and search, these
rows, each in a fresh process with `--threads` threads:
- `mt` at each `--mt-batches` value of `decode.batch_tokens` (source tokens per batch), through mt's own code
  path (load_translator, then mt.decoding.text_front_end.translate_lines over all lines: what `mt translate` does);
- `CTranslate2` at each `--ct2-batches` value: `ctranslate2.Translator(dir, intra_threads=T).translate_batch(
  pieces, beam_size=K, length_penalty=0.6, max_batch_size=N, batch_type="tokens", max_decoding_length=M)` on
  sentencepiece pieces, as its documentation shows (N = 0 is its default: everything in one batch), with its
  own choice of matrix products (on an Intel CPU, MKL's) or `--ct2-mkl 0|1` (its CT2_USE_MKL; `mt` sets 0
  unless the user set it: mt/decoding/ct2_backend.py). M is the
  longest source + 50, the limit of mt's longest sentence (CTranslate2 takes one limit per call; mt's is
  per sentence: source + 50);
- `process` rows: the whole `mt translate -c CKPT -i dev.de -o out` command at its defaults (with
  `--process-batch-tokens N`, mt's and the baseline's with `--batch-tokens N`), and a CTranslate2
  script doing the same work (load, read, tokenize, translate at its best batch from the sweep, detokenize,
  write), timed from outside, start-up and imports included;
- with `--baseline DIR` (another checkout of mt, e.g. a git worktree of an older commit), its mt rows at each
  `--baseline-batches` value and its whole command, in the same rounds: a before-and-after that a slow spell of
  the machine cannot fake.
`seconds` times decoding only (tokenize to detokenize); tokens/s counts the output's target tokens, EOS included
(the output re-tokenized with the target model, so both engines are counted alike). With `--repeat R` all rows
run R times in rounds (every row, then every row again), so a slow spell of the machine hits every engine; the
table gives medians. The ratio lines divide mt's best median time by CTranslate2's best (> 1.00: mt is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's mt, whichever one is installed
SOURCE, REFERENCE = ROOT / "data/ddtp-de-en/dev.de", ROOT / "data/ddtp-de-en/dev.en"
ALPHA, MAX_LEN_B = 0.6, 50


def read_lines(path: Path, limit: int | None) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()[:limit]


def run_mt(model: str, beam: int, batch: int, lines: list[str], device: str) -> tuple[float, list[str]]:
    import torch

    from mt.config import DecodeConfig
    from mt.decoding.text_front_end import translate_lines
    from mt.decoding.loading import load_translator

    tr = load_translator(model, device)
    start = time.perf_counter()
    with torch.inference_mode():
        opts = DecodeConfig(beam_size=beam, alpha=ALPHA, max_len_a=1.0, max_len_b=MAX_LEN_B, batch_tokens=batch)
        texts = [h[0][0] for h in translate_lines(tr, lines, opts)]
    return time.perf_counter() - start, texts


def run_ct2(directory: str, beam: int, batch: int, lines: list[str], threads: int,
            device: str) -> tuple[float, list[str]]:
    import ctranslate2
    import sentencepiece as spm

    translator = ctranslate2.Translator(directory, device=device, intra_threads=threads)
    src = spm.SentencePieceProcessor(model_file=f"{directory}/source.spm")
    tgt = spm.SentencePieceProcessor(model_file=f"{directory}/target.spm")
    start = time.perf_counter()
    pieces = src.encode(lines, out_type=str)
    longest = max(len(p) for p in pieces)
    results = translator.translate_batch(pieces, beam_size=beam, length_penalty=ALPHA, max_batch_size=batch,
                                         batch_type="tokens", max_decoding_length=longest + MAX_LEN_B)
    texts = [tgt.decode(r.hypotheses[0]) for r in results]
    return time.perf_counter() - start, texts


def child_main(args) -> None:
    """One row in this (fresh) process: print its decode seconds and outputs as JSON, or write `--output`. A
    CTranslate2 row imports what a CTranslate2 user's script imports (ctranslate2, sentencepiece), not mt or
    torch: importing torch and its teardown at exit take about 1.3 s of a whole process."""
    lines = read_lines(Path(args.input), args.limit)
    if args.engine == "mt":
        if args.root:  # a baseline checkout's mt
            sys.path.insert(0, args.root)
        try:  # before torch, as the `mt` command: its OpenMP setting must come first
            from mt.tuning import tune_process

            tune_process(["translate"])
        except ImportError:  # a checkout whose `import mt` tunes the process itself
            import mt  # noqa: F401
        import torch  # noqa: I001

        torch.set_num_threads(args.threads)
        seconds, texts = run_mt(args.model, args.beam, args.batch, lines, args.device)
    else:
        seconds, texts = run_ct2(args.model, args.beam, args.batch, lines, args.threads, args.device)
    if args.output:  # the CTranslate2 `process` row: a script doing what `mt translate -o` does
        Path(args.output).write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    else:
        print(json.dumps({"seconds": seconds, "texts": texts}))


class Bench:
    def __init__(self, args, tmp: Path):
        self.args, self.tmp = args, tmp
        self.lines = read_lines(SOURCE, args.limit)
        self.runs: dict[tuple, list[dict]] = {}

    def row(self, engine: str, model: str, beam: int, batch: int) -> dict:
        """engine: mt, base (mt from the `--baseline` checkout) or ct2."""
        a, root = self.args, self.root(engine)
        command = [sys.executable, __file__, "--child", "--engine", "ct2" if engine == "ct2" else "mt", "--model",
                   model, "--beam", str(beam), "--batch", str(batch), "--threads", str(a.threads), "--input",
                   str(SOURCE), "--root", str(root), "--device", a.device]
        command += ["--limit", str(a.limit)] if a.limit else []
        process_s, stdout = self.timed(command, root)
        return {**json.loads(stdout), "process_s": process_s}

    def timed(self, command: list[str], root: Path = ROOT) -> tuple[float, str]:
        """Run a child with `root`'s mt and --threads threads (`mt translate` uses torch's default, so the
        thread count travels as OMP_NUM_THREADS); its wall seconds and stdout."""
        start = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": str(root), "OMP_NUM_THREADS": str(self.args.threads)}
        env.pop("CT2_USE_MKL", None)  # the export in this process set it (mt/decoding/ct2_backend.py)
        if self.args.ct2_mkl != "library":
            env["CT2_USE_MKL"] = self.args.ct2_mkl
        out = subprocess.run(command, check=False, capture_output=True, text=True, env=env)
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed:\n{out.stderr}")
        return time.perf_counter() - start, out.stdout

    def root(self, engine: str) -> Path:
        return self.args.baseline.resolve() if engine == "base" else ROOT

    def mt_process(self, model: str, beam: int, engine: str = "mt") -> dict:
        """The `mt translate` command as a user runs it: its defaults, besides the search being compared."""
        out = self.tmp / "mt.out"
        source = self._source_file()
        command = [sys.executable, "-m", "mt", "translate", "-c", model, "-i", str(source), "-o", str(out),
                   "--device", self.args.device, "--beam-size", str(beam), "--alpha", str(ALPHA), "--max-len-a",
                   "1", "--max-len-b", str(MAX_LEN_B)]
        if self.args.process_batch_tokens:  # the baseline's too: older checkpoints store a smaller default
            command += ["--batch-tokens", str(self.args.process_batch_tokens)]
        process_s, _ = self.timed(command, self.root(engine))
        return {"process_s": process_s, "texts": out.read_text(encoding="utf-8").splitlines()}

    def ct2_process(self, directory: str, beam: int, batch: int) -> dict:
        a, out = self.args, self.tmp / "ct2.out"
        command = [sys.executable, __file__, "--child", "--engine", "ct2", "--model", directory, "--beam", str(beam),
                   "--batch", str(batch), "--threads", str(a.threads), "--input", str(self._source_file()),
                   "--output", str(out), "--device", a.device]
        process_s, _ = self.timed(command)
        return {"process_s": process_s, "texts": out.read_text(encoding="utf-8").splitlines()}

    def _source_file(self) -> Path:
        path = self.tmp / "source.txt"
        if not path.exists():
            path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        return path

    def record(self, key: tuple, result: dict) -> None:
        self.runs.setdefault(key, []).append(result)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[], help="an mt checkpoint (repeat for several)")
    parser.add_argument("--beams", default="1,4", help="searches to compare (1 = greedy)")
    parser.add_argument("--mt-batches", default="4096,8192,16384", help="mt decode.batch_tokens values")
    parser.add_argument("--ct2-batches", default="0,1024,4096,16384", help="CTranslate2 max_batch_size values")
    parser.add_argument("--process-batch-tokens", type=int, help="--batch-tokens for mt's whole command (default: "
                        "the checkpoint's decode.batch_tokens; a checkpoint stores the default of its day)")
    parser.add_argument("--limit", type=int, default=None, help="first N dev sentences (default: all 883)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                        help="where both engines decode, in float32 both")
    parser.add_argument("--ct2-mkl", default="library", choices=["library", "0", "1"],
                        help="CTranslate2's CT2_USE_MKL: its own choice (MKL on Intel CPUs), or 0 (oneDNN) or 1")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of all rows; the table gives medians")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--baseline", type=Path, help="another mt checkout (e.g. a git worktree of an older "
                        "commit): its mt rows run in turns with the others")
    parser.add_argument("--baseline-batches", default="4096,16384", help="its decode.batch_tokens values")
    for hidden in ("--engine", "--input", "--output", "--root"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    parser.add_argument("--beam", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--batch", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.model = args.model[0]
        child_main(args)
        return
    if not args.model:
        parser.error("give at least one --model")
    from mt.interop.ctranslate2 import export_ctranslate2
    from mt.training.corpus_scores import score_corpus

    beams = [int(b) for b in args.beams.split(",")]
    mt_batches = [int(b) for b in args.mt_batches.split(",")]
    ct2_batches = [int(b) for b in args.ct2_batches.split(",")]
    base_batches = [int(b) for b in args.baseline_batches.split(",")] if args.baseline else []
    refs = read_lines(REFERENCE, args.limit)
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(args, Path(tmp))
        exported = {m: str(export_ctranslate2(m, Path(tmp) / f"ct2-{i}")) for i, m in enumerate(args.model)}
        for round_ in range(args.repeat):
            for model in args.model:
                for beam in beams:
                    print(f"round {round_ + 1}/{args.repeat}: {model} beam {beam}", file=sys.stderr, flush=True)
                    for batch in mt_batches:
                        bench.record((model, beam, "mt", batch), bench.row("mt", model, beam, batch))
                    for batch in base_batches:
                        bench.record((model, beam, "base", batch), bench.row("base", model, beam, batch))
                    for batch in ct2_batches:
                        bench.record((model, beam, "ct2", batch), bench.row("ct2", exported[model], beam, batch))
                    best_ct2 = _best_batch(bench.runs, model, beam, "ct2", ct2_batches)
                    bench.record((model, beam, "mt", "process"), bench.mt_process(model, beam))
                    if args.baseline:
                        bench.record((model, beam, "base", "process"), bench.mt_process(model, beam, "base"))
                    bench.record((model, beam, "ct2", "process"), bench.ct2_process(exported[model], beam, best_ct2))
        report(bench, args, beams, mt_batches, ct2_batches, base_batches, refs, score_corpus)


def _best_batch(runs, model, beam, engine, batches) -> int:
    return min(batches, key=lambda b: statistics.median(r["seconds"] for r in runs[model, beam, engine, b]))


def report(bench: Bench, args, beams, mt_batches, ct2_batches, base_batches, refs, score_corpus) -> None:
    from mt.checkpoint import load_checkpoint
    from mt.data.tokenizer import Tokenizer

    print(f"{len(bench.lines)} sentences of {SOURCE.relative_to(ROOT)}; {args.device.upper()}, {args.threads} "
          f"threads; CTranslate2's CT2_USE_MKL: {args.ct2_mkl}; alpha {ALPHA}, max length source + {MAX_LEN_B}; "
          f"medians of {args.repeat} round(s)")
    print("| model | search | engine | batch (source tokens) | seconds | process s | target tokens/s | BLEU |")
    print("|---|---|---|---|---:|---:|---:|---:|")
    summary = []
    for model in args.model:
        tgt = Tokenizer.from_tensor(load_checkpoint(model)["tgt_tokenizer"])
        name = Path(model).name
        for beam in beams:
            search = "greedy" if beam == 1 else f"beam {beam}"
            engines = [("mt", mt_batches)] + ([("base", base_batches)] if base_batches else []) + [("ct2", ct2_batches)]
            for engine, batches in engines:
                for batch in batches + ["process"]:
                    rs = bench.runs[model, beam, engine, batch]
                    texts = rs[0]["texts"]
                    tokens = sum(len(t) + 1 for t in tgt.encode(texts))
                    bleu = score_corpus(texts, refs, ["bleu"])["bleu"]["score"]
                    seconds = statistics.median(r["seconds"] for r in rs) if batch != "process" else None
                    label = ("default (all in one)" if engine == "ct2" and batch == 0 else
                             "whole command" if batch == "process" else str(batch))
                    engine_name = {"mt": "mt", "ct2": "CTranslate2", "base": f"mt at {args.baseline and args.baseline.name}"}
                    print(f"| {name} | {search} | {engine_name[engine]} | {label} | "
                          f"{'' if seconds is None else f'{seconds:.2f}'} | "
                          f"{statistics.median(r['process_s'] for r in rs):.2f} | "
                          f"{'' if seconds is None else f'{tokens / seconds:.0f}'} | {bleu:.2f} |")
            mt_best = _best_batch(bench.runs, model, beam, "mt", mt_batches)
            ct2_best = _best_batch(bench.runs, model, beam, "ct2", ct2_batches)
            seconds = {e: statistics.median(r["seconds"] for r in bench.runs[model, beam, e, b])
                       for e, b in (("mt", mt_best), ("ct2", ct2_best))}
            process = {e: statistics.median(r["process_s"] for r in bench.runs[model, beam, e, "process"])
                       for e in ("mt", "ct2")}
            same = sum(a == b for a, b in zip(bench.runs[model, beam, "mt", mt_best][0]["texts"],
                                              bench.runs[model, beam, "ct2", ct2_best][0]["texts"]))
            summary.append(f"{name} {search}: mt speed / CTranslate2 speed at each one's best batch ({mt_best} / "
                           f"{ct2_best}) = {seconds['ct2'] / seconds['mt']:.2f}x; whole process "
                           f"{process['ct2'] / process['mt']:.2f}x; identical output lines {same}/{len(bench.lines)}")
            if base_batches:
                base_best = _best_batch(bench.runs, model, beam, "base", base_batches)
                base = statistics.median(r["seconds"] for r in bench.runs[model, beam, "base", base_best])
                base_process = statistics.median(r["process_s"] for r in bench.runs[model, beam, "base", "process"])
                summary.append(f"{name} {search}: the baseline's speed / CTranslate2's at each one's best batch "
                               f"({base_best} / {ct2_best}) = {seconds['ct2'] / base:.2f}x; whole process "
                               f"{process['ct2'] / base_process:.2f}x")
    print("\n".join(summary))


if __name__ == "__main__":
    main()
