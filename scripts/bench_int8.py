"""How far each int8 path of mt moves a model's scores, on this CPU as it is and with its ISA capped at AVX2.

    python scripts/bench_int8.py --checkpoint RUN/checkpoint_last.pt [--lines 300] [--beam 4] [--isa native,avx2]

The checkpoint is exported three ways with `mt export` (float32; `--quantization int8`; an Argos package, whose
default is int8) into a temporary folder. Then, for each ISA setting, one fresh process (the libraries read their
ISA switches when they load) scores the first `--lines` held-out pairs of the shipped dev set (teacher forcing:
each reference pair's log-probability) and translates them with beam search, for each int8 path:
- `checkpoint --quantize int8`: mt's own model with torch's dynamic int8 (fbgemm);
- `export --quantize int8`: the float32 export, quantized by mt's CTranslate2 loader;
- `int8 export`: the export written with `--quantization int8`, through mt's loader;
- `argos package`: the package's model folder in plain `ctranslate2.Translator(dir, compute_type="default")`, as
  argostranslate (and so LibreTranslate) loads it.
Each row prints the mean and largest |change| of a pair's log-probability against its float32 model (the checkpoint
for mt's int8, the float32 export for the others), measured in the same process, the beam outputs that changed,
BLEU against the references (int8 and float32), and sentences/s of the search.

`--isa avx2` caps every library's matrix code at AVX2 (no AVX-512, no VNNI), as on an AMD EPYC up to Zen 3 or an
Intel CPU before Cascade Lake: ONEDNN_MAX_CPU_ISA (oneDNN, in CTranslate2 and torch), MKL_ENABLE_INSTRUCTIONS,
FBGEMM_ENABLE_INSTRUCTIONS (torch's int8), ATEN_CPU_CAPABILITY and CT2_FORCE_CPU_ISA. `--isa avx2-mkl` does the
same with CT2_USE_MKL=1 (CTranslate2's products through MKL instead of oneDNN).
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
import zipfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's mt, whichever one is installed
SOURCE, REFERENCE = ROOT / "data/ddtp-de-en/dev.de", ROOT / "data/ddtp-de-en/dev.en"
AVX2 = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
        "ATEN_CPU_CAPABILITY": "avx2", "CT2_FORCE_CPU_ISA": "AVX2"}
ISAS = {"native": {}, "avx2": AVX2, "avx2-mkl": {**AVX2, "CT2_USE_MKL": "1"}}


def mt(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "mt", *map(str, args)], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def export_all(checkpoint: Path, folder: Path) -> dict[str, Path]:
    mt("export", "-c", checkpoint, "-o", folder / "float32")
    mt("export", "-c", checkpoint, "-o", folder / "int8", "--quantization", "int8")
    mt("export", "-c", checkpoint, "-o", folder / "package.argosmodel", "--format", "argos", "--source-lang", "de",
       "--target-lang", "en")
    with zipfile.ZipFile(folder / "package.argosmodel") as package:
        package.extractall(folder / "argos")
    model = next((folder / "argos").glob("*/model"))
    return {"checkpoint": checkpoint, "float32": folder / "float32", "int8": folder / "int8", "argos": model}


# --- the worker: one process per ISA setting ---------------------------------------------------------------------

def scores_and_outputs(translator, sources: list[str], targets: list[str], beam: int) -> dict:
    from mt.decoding.text_front_end import translate_lines
    from mt.decoding.scoring import score_pairs

    scores = score_pairs(translator, sources, targets, alpha=0.6, normalize=False)
    start = time.perf_counter()
    found = translate_lines(translator, sources, replace(translator.cfg.decode, beam_size=beam, alpha=0.6))
    seconds = time.perf_counter() - start
    return {"scores": scores, "outputs": [hyps[0].text for hyps in found], "seconds": seconds}


def plain_ctranslate2(model: Path, sources: list[str], targets: list[str], beam: int) -> dict:
    """A model folder as argostranslate loads an Argos package's: CTranslate2's defaults, its sentencepiece."""
    import ctranslate2
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(model / "source.spm"))
    translator = ctranslate2.Translator(str(model), device="cpu", compute_type="default",
                                        intra_threads=int(os.environ.get("BENCH_THREADS", "2")))
    src = [sp.encode(s, out_type=str) for s in sources]
    tgt = [sp.encode(t, out_type=str) for t in targets]
    scores = [sum(r.log_probs) for r in translator.score_batch(src, tgt)]
    start = time.perf_counter()
    found = translator.translate_batch(src, beam_size=beam, length_penalty=0.6, max_decoding_length=256)
    seconds = time.perf_counter() - start
    return {"scores": scores, "outputs": [sp.decode(r.hypotheses[0]) for r in found], "seconds": seconds}


def worker(models: dict[str, str], lines: int, beam: int) -> dict:
    import torch

    from mt.decoding.loading import load_translator

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    sources = SOURCE.read_text(encoding="utf-8").splitlines()[:lines]
    targets = REFERENCE.read_text(encoding="utf-8").splitlines()[:lines]
    rows = {}
    for name, path, quantize in (("checkpoint float32", models["checkpoint"], None),
                                 ("checkpoint --quantize int8", models["checkpoint"], "int8"),
                                 ("export float32", models["float32"], None),
                                 ("export --quantize int8", models["float32"], "int8"),
                                 ("int8 export", models["int8"], None)):
        rows[name] = scores_and_outputs(load_translator(path, "cpu", quantize), sources, targets, beam)
    rows["float32 export, as argostranslate loads it"] = plain_ctranslate2(Path(models["float32"]), sources, targets,
                                                                         beam)
    rows["argos package"] = plain_ctranslate2(Path(models["argos"]), sources, targets, beam)
    return rows


# --- the table ----------------------------------------------------------------------------------------------------

def compared(row: dict, base: dict, references: list[str]) -> dict:
    import sacrebleu

    changes = [abs(a - b) for a, b in zip(row["scores"], base["scores"])]
    return {"mean": statistics.fmean(changes), "max": max(changes),
            "changed": sum(a != b for a, b in zip(row["outputs"], base["outputs"])),
            "bleu": sacrebleu.corpus_bleu(row["outputs"], [references]).score,
            "float_bleu": sacrebleu.corpus_bleu(base["outputs"], [references]).score,
            "per_s": len(row["outputs"]) / row["seconds"]}


BASES = {"checkpoint --quantize int8": "checkpoint float32", "export --quantize int8": "export float32",
         "int8 export": "export float32", "argos package": "float32 export, as argostranslate loads it"}


def table(results: dict[str, dict], lines: int) -> str:
    references = REFERENCE.read_text(encoding="utf-8").splitlines()[:lines]
    out = ["| int8 path | ISA | mean \\|change\\| (nats) | largest | beam outputs changed | BLEU int8 / float32 "
           "| sentences/s int8 / float32 |", "|---|---|---:|---:|---:|---:|---:|"]
    for path, base in BASES.items():
        for isa, rows in results.items():
            c = compared(rows[path], rows[base], references)
            float_per_s = len(rows[base]["outputs"]) / rows[base]["seconds"]
            out.append(f"| {path} | {isa} | {c['mean']:.4f} | {c['max']:.3f} | {c['changed']} of {lines} | "
                       f"{c['bleu']:.2f} / {c['float_bleu']:.2f} | {c['per_s']:.1f} / {float_per_s:.1f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--lines", type=int, default=300)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--isa", default="native,avx2", help=f"comma-separated: {', '.join(ISAS)}")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write every score and output here")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # JSON of the exported models: run the rows, print JSON
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker), args.lines, args.beam)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        models = {k: str(v) for k, v in export_all(args.checkpoint.resolve(), Path(tmp)).items()}
        results = {}
        for isa in args.isa.split(","):
            env = {**os.environ, **ISAS[isa], "BENCH_THREADS": str(args.threads)}
            proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(models), "--lines",
                                   str(args.lines), "--beam", str(args.beam)], env=env, check=True, cwd=ROOT,
                                  capture_output=True, text=True)
            results[isa] = json.loads(proc.stdout.splitlines()[-1])
    if args.json:
        args.json.write_text(json.dumps(results), encoding="utf-8")
    print(table(results, args.lines))


if __name__ == "__main__":
    main()
