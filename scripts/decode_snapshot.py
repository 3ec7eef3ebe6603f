"""Save or check a checkpoint's decoding outputs, to show that a change to the search changes nothing.

    python scripts/decode_snapshot.py -c CKPT --save before.json [--limit 300]
    python scripts/decode_snapshot.py -c CKPT --check before.json

Records greedy, beam 4 and beam 4 with 2-best hypotheses (tokens, score and log-probability, exactly as
floats) of the first `--limit` dev sentences; `--check` prints the share of identical lines per setting and
the largest score difference, and exits non-zero unless everything is identical.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's mt, whichever one is installed
SETTINGS = {"greedy": dict(beam_size=1, nbest=1), "beam4": dict(beam_size=4, nbest=1),
            "beam4_nbest2": dict(beam_size=4, nbest=2)}


def snapshot(checkpoint: str, limit: int, device: str) -> dict:
    import torch

    from mt.config import DecodeConfig
    from mt.decoding.lines import LineIds, translate_ids
    from mt.decoding.loading import load_translator

    tr = load_translator(checkpoint, device)
    lines = (ROOT / "data/ddtp-de-en/dev.de").read_text(encoding="utf-8").splitlines()[:limit]
    ids = [LineIds(source, i) for i, source in enumerate(tr.src_tokenizer.encode(lines))]
    out = {}
    with torch.inference_mode():
        for name, options in SETTINGS.items():
            opts = DecodeConfig(beam_size=options["beam_size"], alpha=0.6, max_len_a=1.0, max_len_b=50,
                                batch_tokens=4096)
            hyps = translate_ids(tr.backend, ids, opts, nbest=options["nbest"])
            out[name] = [[[h.tokens, h.score, h.log_prob] for h in per_line] for per_line in hyps]
    return out


def compare(before: dict, after: dict) -> bool:
    same_everywhere = True
    for name in SETTINGS:
        pairs = list(zip(before[name], after[name]))
        same = sum(a == b for a, b in pairs)
        tokens_same = sum([h[0] for h in a] == [h[0] for h in b] for a, b in pairs)
        diff = max((abs(x[1] - y[1]) for a, b in pairs for x, y in zip(a, b)), default=0.0)
        print(f"{name}: {same}/{len(pairs)} identical (tokens and scores), {tokens_same}/{len(pairs)} identical "
              f"tokens, max score difference {diff:.3g}")
        same_everywhere &= same == len(pairs) == len(after[name])
    return same_everywhere


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-c", "--checkpoint", required=True)
    parser.add_argument("--limit", type=int, default=300)
    parser.add_argument("--device", default="cpu")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--save")
    action.add_argument("--check")
    args = parser.parse_args()
    result = snapshot(args.checkpoint, args.limit, args.device)
    if args.save:
        Path(args.save).write_text(json.dumps(result))
        return
    sys.exit(0 if compare(json.loads(Path(args.check).read_text()), result) else 1)


if __name__ == "__main__":
    main()
