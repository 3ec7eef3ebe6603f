"""The CTranslate2 backend: decode with a directory written by `mt export` (mt/interop/ctranslate2.py).

The directory holds CTranslate2's model.bin, config.json and vocabularies, the sentencepiece model(s)
(source.spm, target.spm) and mt.yaml (the checkpoint's config, for the decode defaults), so `mt translate -c
DIR` needs nothing else. `ctranslate2` is the optional extra `mt[ct2]`.
"""

from __future__ import annotations

import os
import struct
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import torch
import yaml

from mt.config import DecodeConfig, config_from_dict
from mt.decoding.ct2_model_bin import INT8_COMPUTE, in_int8_limit, is_weight, model_bin_bytes, parse_model_bin
from mt.decoding.protocol import DecodeHooks, Hypothesis, SentenceRequest, Translator, Work, grouped, length_penalty
from mt.errors import MtError
from mt.decoding.scheduler import in_static_batches
from mt.data.tokenizer import Tokenizer

MARKER = "mt.yaml"  # the file that tells an exported directory from any other
END = "</s>"  # CTranslate2's end token


def import_ctranslate2():
    """The ctranslate2 module, on an Intel CPU with oneDNN's matrix products rather than MKL's unless the user
    set CT2_USE_MKL (read when the library loads): with two threads MKL's made a beam-4 sentence of the demo
    model take 114 ms against 15 (a batch of 40: 54 against 166 sentences/s; one thread 22 ms either way;
    CTranslate2 4.8.5, 2-core Intel Xeon; `python scripts/bench_decode.py --ct2-mkl 0|library` re-measures)."""
    os.environ.setdefault("CT2_USE_MKL", "0")
    try:
        import ctranslate2
    except ImportError:
        raise MtError("CTranslate2 is not installed; install the extra: pip install 'mt[ct2]'") from None
    return ctranslate2


def is_exported(path: str | Path) -> bool:
    return (Path(path) / MARKER).is_file()


def load_ct2_translator(directory: str | Path, device: str = "auto", quantize: str | None = None,
                        parallel: int = 1) -> Translator:
    """An exported directory as a Translator; `quantize` is a CTranslate2 compute type (e.g. int8). `parallel`:
    on a CPU, batches CTranslate2 decodes at once (its inter_threads), each on an equal share of the threads."""
    directory = Path(directory)
    if not is_exported(directory):
        raise MtError(f"{directory}: not a CTranslate2 export (no {MARKER}); this command needs an mt checkpoint "
                      "or a CTranslate2 export (`mt export --format ctranslate2`)")
    ct2 = import_ctranslate2()
    missing = [name for name in EXPORTED_FILES if not (directory / name).is_file()]
    if missing:
        raise MtError(f"{directory / missing[0]}: missing; export the model again (mt export --force)")
    cfg = config_from_dict(read_marker(directory / MARKER), source=str(directory / MARKER))
    try:
        src_tok = Tokenizer((directory / "source.spm").read_bytes())
        tgt_tok = Tokenizer((directory / "target.spm").read_bytes())
        translator, alone = _ct2_translators(ct2, directory, device, quantize or "default", parallel)
    except (OSError, RuntimeError, ValueError) as e:  # unreadable, a broken sentencepiece or CTranslate2 model
        raise MtError(f"{directory}: not a usable exported model ({_first_line(e)}); export it again") from None
    max_positions = cfg.model.max_positions
    backend = Ct2Backend(translator, src_tok, tgt_tok, max_positions,
                         alone=alone and Ct2Backend(alone, src_tok, tgt_tok, max_positions))
    return Translator(backend, src_tok, tgt_tok, cfg)


EXPORTED_FILES = (MARKER, "model.bin", "source.spm", "target.spm")


def read_marker(path: Path) -> dict:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise MtError(f"{path}: malformed ({_first_line(e)}); export the model again") from None


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


def _ct2_translators(ct2, directory: Path, device: str, compute_type: str, parallel: int = 1):
    """CTranslate2's Translator on `device`, and on a CPU with `parallel` > 1 the same model on every thread for
    a call alone (else None); `auto` is CUDA only where CTranslate2 can decode there. Its wheels need CUDA 12's
    libraries (libcublas.so.12), which a machine with a GPU may lack (an H100 with CUDA 13 only), and it says so
    only at the first translation: so a one-token translation is tried first."""
    files = None

    def make(on: str, batches: int = 1):
        return ct2.Translator(str(directory), device=on, compute_type=compute_type, inter_threads=batches,
                              intra_threads=max(1, torch.get_num_threads() // batches), files=files)

    def on_cpu():
        nonlocal files
        files = files_in_int8_limit(directory, compute_type)
        batches = min(parallel, torch.get_num_threads())
        # The copy on every thread is made first: made after one on a share of the threads, it decoded a
        # sentence in 70 ms against 8 (CTranslate2 4.8.5 with oneDNN, 2 cores).
        alone = make("cpu") if batches > 1 else None
        return make("cpu", batches), alone

    if device == "cpu" or (device == "auto" and ct2.get_cuda_device_count() == 0):
        return on_cpu()
    translator = make("cuda")
    try:
        translator.translate_batch([["\u2581"]], max_decoding_length=1)
    except RuntimeError as err:
        if device == "cuda":
            raise MtError(f"{directory}: CTranslate2 cannot decode on CUDA here ({err})") from None
        print(f"warning: CTranslate2 cannot decode on CUDA here ({err}); decoding on the CPU", file=sys.stderr)
        return on_cpu()
    return translator, None


def files_in_int8_limit(directory: Path, compute_type: str) -> dict[str, bytes] | None:
    """The export's files for CTranslate2 with its weights in 7-bit int8 (mt/decoding/ct2_model_bin.py), where it
    would compute in int8 on a CPU with weights of 8 bits: a float export asked for int8 (which CTranslate2 would
    quantize in 8 bits), or an int8 export written in 8 bits. None where model.bin is used as it is."""
    data = (directory / "model.bin").read_bytes()
    try:
        model = parse_model_bin(data)
    except (ValueError, struct.error, UnicodeDecodeError):
        return None  # CTranslate2 reads it, or says what is wrong, itself
    holds_int8 = any(dtype == "int8" and is_weight(name, values)
                     for name, (values, dtype) in model.variables.items())
    if compute_type not in INT8_COMPUTE and not (compute_type == "default" and holds_int8):
        return None
    limited = in_int8_limit(model)
    if limited is None:
        return None
    files = {path.name: path.read_bytes() for path in directory.iterdir()
             if path.is_file() and path.name not in (MARKER, "source.spm", "target.spm", "model.bin")}
    return {**files, "model.bin": model_bin_bytes(limited)}


class Ct2Backend:
    """CTranslate2's search, scored like mt's (GNMT length penalty), over sentencepiece pieces. With `parallel`
    calls at once on a CPU, each on a share of the threads, `alone` is the same model on every thread, for a
    short call that has the machine to itself (`CallingEngine`)."""

    def __init__(self, translator, src_tokenizer: Tokenizer, tgt_tokenizer: Tokenizer, max_positions: int,
                 alone: Ct2Backend | None = None):
        self.translator, self.max_positions, self.alone = translator, max_positions, alone
        self.parallel = translator.num_translators  # calls that decode at once (from as many threads)
        self.src_sp, self.tgt_sp = src_tokenizer.sp, tgt_tokenizer.sp

    def search(self, requests: list[SentenceRequest]) -> list[list[Hypothesis]]:
        """Requests with the same settings in static batches (mt/decoding/scheduler.py), each batch one call."""
        if any(r.terms for r in requests):
            raise MtError("--constraints decode with a checkpoint, not an exported directory (CTranslate2 has no "
                          "constrained search)")
        results: list[list[Hypothesis]] = [[] for _ in requests]
        for index in grouped(requests):
            group = [requests[i] for i in index]
            found = in_static_batches([len(r.source) + 1 for r in group], group[0].opts.batch_tokens,
                                      lambda batch: self._batch([group[i] for i in batch]))
            for i, hyps in zip(index, found):
                results[i] = hyps
        return results

    def engine(self, hooks: DecodeHooks | None = None, join_every: int | None = None) -> CallingEngine:
        """Its calling engine; `join_every` does not apply (a call decodes what it was given, to the end)."""
        return CallingEngine(self, hooks)

    def _batch(self, requests: list[SentenceRequest]) -> list[list[Hypothesis]]:
        prefixed = [i for i, r in enumerate(requests) if r.prefix]
        if prefixed and len(prefixed) < len(requests):
            # A call with target prefixes decodes every row of it another way, those without one too (a tiny
            # model's line came out "s" beside a prefixed line and "" alone): rows without one get a call of
            # their own, so a line's output does not depend on whether others have prefixes.
            plain = [i for i, r in enumerate(requests) if not r.prefix]
            hyps = [None] * len(requests)
            for group in (prefixed, plain):
                for i, h in zip(group, self._batch([requests[i] for i in group])):
                    hyps[i] = h
            return hyps
        first = requests[0]
        opts, nbest = first.opts, first.nbest
        sources = [list(r.source) for r in requests]
        max_len = [r.max_len for r in requests]
        prefixes = [list(r.prefix) for r in requests] if prefixed else None
        pieces = [[self.src_sp.id_to_piece(t) for t in source] for source in sources]
        target_prefix = [[self.tgt_sp.id_to_piece(t) for t in p] for p in prefixes] if prefixes else None
        attention = any(r.attention for r in requests)
        if opts.sampling:
            hyps = self._samples(pieces, max_len, opts, nbest, target_prefix, attention)
        else:
            hyps = self._search(pieces, max_len, opts, nbest, target_prefix, attention)
        return [[Hypothesis([self.tgt_sp.piece_to_id(p) for p in tokens], score, log_prob, weights)
                 for tokens, score, log_prob, weights in per_source] for per_source in hyps]

    def attention(self, sources: list[list[int]], targets: list[list[int]]) -> list[torch.Tensor]:
        """CTranslate2's attention (the layer and heads `mt export` set, as mt/decoding/attention_alignment.py chooses) while it
        decodes each target forced as its prefix."""
        pieces = [[self.src_sp.id_to_piece(t) for t in source] for source in sources]
        target_pieces = [[self.tgt_sp.id_to_piece(t) for t in target] for target in targets]
        out = self.translator.translate_batch(pieces, target_prefix=target_pieces, beam_size=1, min_decoding_length=0,
                                              max_decoding_length=max((len(t) for t in targets), default=0) + 1,
                                              return_attention=True)
        return [_weights(r.attention[0], len(t), len(s)) for r, s, t in zip(out, sources, targets)]

    def _samples(self, pieces, max_len: list[int], opts: DecodeConfig, nbest: int, target_prefix=None,
                 attention: bool = False):
        """`nbest` samples per source, in the order drawn: each source repeated, one sample each (as mt draws).
        CTranslate2's sampler has one random stream per call (seeded from opts.seed), so unlike mt's, what a
        line draws depends on the lines that share its batch."""
        import_ctranslate2().set_random_seed(opts.seed)

        def repeat(values):
            return None if values is None else [v for v in values for _ in range(nbest)]

        drawn = self._search(repeat(pieces), repeat(max_len), opts, 1, repeat(target_prefix), attention)
        return [[h for one in drawn[i:i + nbest] for h in one] for i in range(0, len(drawn), nbest)]

    def _search(self, pieces, max_len: list[int], opts: DecodeConfig, nbest: int, target_prefix=None,
                attention: bool = False):
        """(pieces, score, log-prob, attention or None) hypotheses per source, best first. CTranslate2 takes one
        length limit per call, so sources are searched with the largest limit, and those that ran past their own
        again with it. With `attention`, each keeps its cross-attention from the search (`_kept_attention`)."""
        # min_decoding_length 0: CTranslate2 would otherwise forbid EOS at the first step, which mt allows.
        # Greedy search asks for plain log-probs; beam search ranks with CTranslate2's length ** alpha.
        options = dict(beam_size=opts.beam_size, num_hypotheses=nbest,
                       length_penalty=opts.alpha if opts.beam_size > 1 else 0.0, min_decoding_length=0,
                       return_scores=True, return_end_token=True, return_attention=attention)
        if opts.sampling:  # nbest samples of one draw each (CTranslate2's top-k 0 is the whole vocabulary, as mt's)
            options.update(beam_size=1, length_penalty=0.0, sampling_topk=opts.topk, sampling_topp=opts.topp,
                           sampling_temperature=opts.temperature)
        out = self.translator.translate_batch(pieces, max_decoding_length=max(max_len, default=1),
                                              target_prefix=target_prefix, **options)
        for limit in sorted(set(max_len)):
            over = [i for i, r in enumerate(out) if max_len[i] == limit and any(
                len(_without_end(h)) > limit for h in r.hypotheses)]
            if over:
                again = self.translator.translate_batch(
                    [pieces[i] for i in over], max_decoding_length=limit,
                    target_prefix=[target_prefix[i] for i in over] if target_prefix else None, **options)
                for i, r in zip(over, again):
                    out[i] = r
        weights = self._kept_attention(pieces, out, options["beam_size"]) if attention else [None] * len(out)
        return [self._rescored(source, r, options["length_penalty"], opts.alpha, w)
                for source, r, w in zip(pieces, out, weights)]

    def _kept_attention(self, pieces, out, beam_size: int) -> list[list[torch.Tensor]]:
        """Per source, each hypothesis's attention as `attention` gives it: its rows (one per target token, EOS
        dropped) over the source's pieces. A beam search's row 0 (the first step) is not the step's attention in
        CTranslate2 4.x (it matched a forced pass from row 1 on, not on row 0), so it is taken from a one-step
        greedy call, which attends as every hypothesis's first step does: its cost is an encoder pass, against a
        forced decoding of every target for `attention`."""
        first = None
        if beam_size > 1:
            first = self.translator.translate_batch(pieces, beam_size=1, max_decoding_length=1,
                                                    min_decoding_length=0, return_attention=True)
        found = []
        for k, (source, result) in enumerate(zip(pieces, out)):
            per = []
            for tokens, rows in zip(result.hypotheses, result.attention):
                weights = _weights(rows, len(_without_end(tokens)), len(source))
                if first is not None and len(weights):
                    weights[0] = torch.tensor(first[k].attention[0][0], dtype=torch.float32)[:len(source)]
                per.append(weights)
            found.append(per)
        return found

    def _rescored(self, source, result, ct2_alpha, alpha, attention=None):
        """CTranslate2 scores are log-probs over length ** alpha (EOS counted); mt's are over the GNMT penalty
        ((5 + |Y|) / 6) ** alpha: re-score and re-rank. A hypothesis stopped at the length limit gets the
        log-prob of EOS after it (mt's search ends it with EOS there), from CTranslate2's scoring."""
        log_probs = [score * len(tokens) ** ct2_alpha for tokens, score in zip(result.hypotheses, result.scores)]
        unended = [j for j, tokens in enumerate(result.hypotheses) if tokens[-1:] != [END]]
        if unended:
            scored = self.translator.score_batch([source] * len(unended), [result.hypotheses[j] for j in unended])
            for j, s in zip(unended, scored):
                log_probs[j] = sum(s.log_probs)
        hyps = [(_without_end(tokens), lp, w) for tokens, lp, w in zip(result.hypotheses, log_probs,
                                                                      attention or [None] * len(log_probs))]
        return sorted(((t, lp / length_penalty(len(t) + 1, alpha), lp, w) for t, lp, w in hyps), key=lambda h: -h[1])


def _weights(rows: list[list[float]], targets: int, sources: int) -> torch.Tensor:
    """A hypothesis's attention as CTranslate2 returns it (a row per decoding step, the target's then EOS's, over
    the batch's padded source positions) as (targets, sources)."""
    weights = torch.tensor(rows, dtype=torch.float32).reshape(len(rows), -1) if rows else torch.zeros(0, sources)
    return weights[:targets, :sources]


def _without_end(tokens: list[str]) -> list[str]:
    return tokens[:-1] if tokens[-1:] == [END] else tokens


ALONE_TOKENS = 256  # one request of at most this many source tokens, with nothing else decoding or waiting, runs
# on every thread


class CallingEngine:
    """CTranslate2 decoding what arrives while others decode: it has no step-level batch to join, so the works
    taken together decode in one call, from a caller thread of its own. CTranslate2 decodes `parallel` calls at
    once (its inter_threads, `Ct2Backend.parallel`), so sentences arriving while one call decodes start on a free
    thread instead of waiting; each call takes a 1/parallel share of the waiting work.

    A short request (ALONE_TOKENS) with nothing else decoding or waiting runs on every thread instead
    (`Ct2Backend.alone`), and what arrives meanwhile waits for it: one client's sentence took 11 ms (p50) this
    way against 14 on half the threads (docs/serving.md). A long one keeps to its share, so that a short request
    arriving during a document still starts at once; so do calls of several requests: taken alone too, 8
    clients' sentences decoded a fifth slower than in two calls side by side."""

    stepping = False  # calls run on their threads: nothing to step

    def __init__(self, backend: Ct2Backend, hooks: DecodeHooks | None = None):
        self.backend, self.hooks, self.parallel = backend, hooks or DecodeHooks(), backend.parallel
        self.calls = 0  # calls decoding now
        self.count_lock = threading.Lock()  # `calls` goes up on the decode thread and down on the callers
        self.callers = ThreadPoolExecutor(self.parallel, thread_name_prefix="mt-ct2")

    @property
    def idle(self) -> bool:
        return self.calls == 0

    def share(self, waiting: list[int]) -> int:
        """None while every thread decodes; else the first works that hold a 1/parallel share of the waiting
        tokens (at least one), the rest left for the other calls. A call decodes on threads/parallel threads:
        one that took every waiting 20-sentence request ran on one thread while the other had none (2 cores, 32
        such clients: 133 sentences/s; taking shares, 161)."""
        if self.calls >= self.parallel:
            return 0
        if len(waiting) == 1 and self._alone(waiting[0]):
            return 1
        share, taken = sum(waiting) / self.parallel, 0
        for count, tokens in enumerate(waiting, 1):
            taken += tokens
            if taken >= share:
                return count
        return len(waiting)

    def add(self, works: list[Work]) -> None:
        if works:
            alone = len(works) == 1 and self._alone(sum(len(r.source) + 1 for r in works[0].requests))
            slots = self.parallel if alone else 1  # a call alone holds every slot: others wait for it
            with self.count_lock:
                self.calls += slots
            self.callers.submit(self._call, works, self.backend.alone if alone else self.backend, slots)

    def _alone(self, tokens: int) -> bool:
        return self.calls == 0 and self.backend.alone is not None and tokens <= ALONE_TOKENS

    def cancel(self, work: Work) -> None:
        pass  # a call skips the works cancelled before it starts; one decoding finishes unseen

    def step(self) -> None:
        pass

    def held(self) -> list[Work]:
        return []  # a call's fault fails its own works

    def close(self) -> None:
        self.callers.shutdown()

    def _call(self, works: list[Work], backend: Ct2Backend, slots: int) -> None:
        """On a caller thread: one search of every sentence of the works taken together, holding `slots` of the
        `parallel` calls."""
        live = [work for work in works if work.requests and not work.cancelled]
        try:
            found = backend.search([r for work in live for r in work.requests]) if live else []
            self.hooks.step(len(found))
            at = 0
            for work in live:
                work.deliver(found[at:at + len(work.requests)])
                at += len(work.requests)
        except Exception as error:  # a fault of the model, or a request it cannot decode: those works fail
            for work in live:
                work.fail(error)
        finally:
            with self.count_lock:
                self.calls -= slots
            self.hooks.call_ended()
