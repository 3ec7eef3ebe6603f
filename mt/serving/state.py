"""What `mt serve` serves: its settings, the models it loads (one worker each on the decode thread), and the
server state its HTTP routes (mt/serving/app.py) read."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from mt.data.languages import directions
from mt.serving.keys import ApiKeys
from mt.serving.decode_thread import DecodeThread, DecodeWorker
from mt.decoding.protocol import Translator
from mt.errors import HttpError, MtError
from mt.serving.limits import HttpSettings
from mt.decoding.lines import LineText
from mt.data.translation_memories import Memory, read_memory
from mt.serving.suggestions import Suggestions
from mt.decoding.text_front_end import TextBatch
from mt.decoding.loading import load_translator
from mt.decoding.model_backend import ModelBackend
from mt.serving.metrics import Metrics


@dataclass
class ServedModel:
    source: str
    target: str
    translator: Translator
    worker: DecodeWorker
    memory: Memory | None = None  # human translations answered before the model's (--memory)


@dataclass
class Limits:
    max_chars: int = 20_000  # characters of `q` per request
    max_sentences: int = 500  # sentences (or lines of the native endpoint) per request
    max_queued_tokens: int = 100_000  # source tokens waiting or decoding, over all requests of a model
    queue_wait_s: float = 10.0  # how long a request waits for room in a full queue before its 503
    max_glossary_terms: int = 1_000  # entries of a request's glossary
    max_term_chars: int = 200  # characters of a glossary term


@dataclass
class Server:
    models: dict[tuple[str, str], ServedModel]
    decoder: DecodeThread
    limits: Limits
    metrics: Metrics
    api_keys: ApiKeys | None = None
    log_text: bool = False
    ready: bool = False
    metrics_token: str | None = None  # /metrics needs `Authorization: Bearer TOKEN` when set
    closed_unanswered: int = 0  # requests closed with a 503 when the shutdown grace period ran out
    aliases: dict[str, str] = field(default_factory=dict)  # a model's own code -> the one it is served under
    suggestions: Suggestions | None = None  # users' corrections (--suggestions), answered before the model
    specs: tuple[ModelSpec, ...] = ()  # what -m named: SIGHUP loads them again (`reload`)
    settings: ServeSettings | None = None

    def model(self, source, target) -> ServedModel:
        if not isinstance(source, str) or not isinstance(target, str):
            raise HttpError(400, "Invalid request: missing source or target parameter")
        served = self.models.get((self.aliases.get(source, source), self.aliases.get(target, target)))
        if served is None:
            pairs = ", ".join(f"{s}-{t}" for s, t in self.models)
            raise HttpError(400, f"{source}-{target} is not available (this server translates {pairs})")
        return served


@dataclass(frozen=True)
class ModelSpec:
    source: str | None  # None: every direction the model knows (a multilingual model)
    target: str | None
    paths: tuple[str, ...]  # a checkpoint, an exported directory, or several checkpoints (an ensemble)

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        """SRC:TGT=PATH[,PATH...], or PATH[,PATH...] alone for a model that names its directions."""
        pair, sep, paths = text.partition("=")
        if not sep:
            pair, paths = "", text
        source, colon, target = pair.partition(":")
        if sep and not (colon and source.strip() and target.strip()) or not paths.strip():
            raise MtError(f"-m {text}: expected SRC:TGT=PATH (e.g. de:en=runs/de-en/checkpoint_best.pt), or PATH "
                          "of a multilingual model")
        paths = tuple(p.strip() for p in paths.split(",") if p.strip())
        return cls(source.strip() or None, target.strip() or None, paths)

    @property
    def exported(self) -> bool:
        """Whether it is a directory written by `mt export` (decoded by CTranslate2; mt/decoding/loading.py)."""
        return len(self.paths) == 1 and Path(self.paths[0]).is_dir()


@dataclass(frozen=True)
class ServeSettings:
    host: str = "127.0.0.1"
    port: int = 5000
    device: str = "auto"
    limits: Limits = field(default_factory=Limits)
    api_keys: str | None = None
    batching: bool = True  # sentences of concurrent requests decode together (off: one request at a time)
    log_text: bool = False
    threads: int = 0  # CPU threads of the decode thread's torch and of CTranslate2 (0: torch's default)
    parallel_batches: int | None = None  # exported models on a CPU: batches CTranslate2 decodes at once (None:
    # DEFAULT_PARALLEL_BATCHES)
    http: HttpSettings = field(default_factory=HttpSettings)  # body limit, timeouts, CORS, the /metrics token
    quantize: str | None = None  # "int8": int8 weights (mt's for checkpoints, CTranslate2's for exports)
    memories: tuple[str, ...] = ()  # --memory: [SRC:TGT=]FILE[,FILE], for that direction or every one
    suggestions: str | None = None  # --suggestions: the SQLite file /suggest writes (None: /suggest answers 403)


# Two CTranslate2 calls at once, each on half the threads: on 2 cores the demo model's export served 32
# one-sentence clients at 1.6x the sentences/s of one call, 128 at 1.4x, and one client as fast
# (docs/serving.md); where there is one thread, one call (mt/decoding/ct2_backend.py).
DEFAULT_PARALLEL_BATCHES = 2


def _pairs(pairs: list[tuple[str, str]]) -> str:
    return ", ".join(f"{s}-{t}" for s, t in pairs)


def decoding(translator: Translator) -> str:
    """How a served model decodes, for its start-up line: `CTranslate2 int8_float32 (7-bit weights) on cpu, 2 calls
    at once` or `mt, float32 weights on cpu`."""
    backend = translator.backend
    if isinstance(backend, ModelBackend):
        parameter = next(backend.model.parameters())
        quantized = any(type(m).__module__.startswith("torch.ao.nn.quantized") for m in backend.model.modules())
        return f"mt, {'int8' if quantized else str(parameter.dtype).split('.')[-1]} weights on {parameter.device.type}"
    ct2 = backend.translator
    calls = f", {backend.parallel} calls at once" if backend.parallel > 1 else ""
    calls += ", a short call alone on every thread" if backend.alone is not None else ""
    on_cpu_in_int8 = ct2.device == "cpu" and ct2.compute_type.startswith("int8")
    bits = " (7-bit weights)" if on_cpu_in_int8 else ""  # mt/decoding/ct2_backend.py: files_in_int8_limit
    return f"CTranslate2 {ct2.compute_type}{bits} on {ct2.device}{calls}"


def served_code(translator: Translator, code: str) -> str:
    """The code a model's language is served under. LibreTranslate's clients name languages by BCP 47 tags (de,
    zh-Hant), so NLLB's codes (deu_Latn, zho_Hant) are served as langcodes' standard tag of them; other models'
    codes as they are. Requests may name either."""
    if translator.cfg.languages.token != "nllb":
        return code
    import langcodes

    return langcodes.standardize_tag(code.replace("_", "-"))


def served_directions(spec: ModelSpec, translator: Translator) -> list[Translator]:
    """The model of `spec` once per direction it serves: SRC:TGT (a bilingual model without languages is taken at
    its word), or every direction a multilingual model knows, each asked for its own target."""
    name = ",".join(spec.paths)
    known = directions(translator.cfg)
    if spec.source is None:
        if not known:
            raise MtError(f"-m {name}: the model names no languages; give them: -m SRC:TGT={name}")
        return [translator.toward(source, target, name) for source, target in known]
    if not known:
        return [replace(translator, direction=(spec.source, spec.target))]
    return [translator.toward(spec.source, spec.target, name)]


def _memory(specs: tuple[str, ...], pair: tuple[str, str], log) -> Memory | None:
    """The translation memory of one served direction: the --memory files named for it or for every one."""
    mine = [spec for spec in specs if "=" not in spec or spec.partition("=")[0] == f"{pair[0]}:{pair[1]}"]
    memory = read_memory(mine, *pair)
    if memory is not None:
        log(f"mt serve: {pair[0]}-{pair[1]}: a translation memory of {len(memory):,} segments")
    return memory


def load_server(specs: list[ModelSpec], settings: ServeSettings, log) -> Server:
    """Every model loaded on the decode thread, given a worker there (one for all the directions of a
    multilingual model, so that they share its running batch), and warmed with one sentence."""
    api_keys = ApiKeys.read(settings.api_keys) if settings.api_keys is not None else None
    metrics, models, aliases, decoder = Metrics(), {}, {}, DecodeThread()
    try:
        if settings.threads:  # on the decode thread, before any model: CTranslate2 takes torch's count
            decoder.call(functools.partial(torch.set_num_threads, settings.threads))
        for spec in specs:
            _load(spec, settings, decoder, metrics, models, aliases, decoder.call, log)
    except BaseException:
        decoder.stop()
        raise
    suggestions = Suggestions(settings.suggestions) if settings.suggestions else None
    if suggestions is not None:
        log(f"mt serve: suggestions in {settings.suggestions} ({len(suggestions):,} texts corrected)")
    return Server(models, decoder, settings.limits, metrics, api_keys, settings.log_text, ready=True,
                  metrics_token=settings.http.metrics_token, aliases=aliases, suggestions=suggestions,
                  specs=tuple(specs), settings=settings)


def _load(spec: ModelSpec, settings: ServeSettings, decoder: DecodeThread, metrics: Metrics, models: dict,
          aliases: dict, run, log) -> None:
    """One -m spec loaded (by `run`: on the decode thread at start, beside it on a reload), given its worker and
    warmed with one sentence; its directions added to `models` and `aliases`."""
    translator = run(functools.partial(load_translator, list(spec.paths), settings.device, settings.quantize,
                                       ct2_parallel=settings.parallel_batches or DEFAULT_PARALLEL_BATCHES))
    worker = decoder.add_worker(translator.backend, settings.limits.max_queued_tokens, settings.batching, metrics)
    bound = served_directions(spec, translator)
    pairs = [tuple(served_code(tr, code) for code in tr.direction) for tr in bound]
    if (settings.parallel_batches or 1) > 1 and not spec.exported:
        log(f"warning: --parallel-batches applies to exported models; {_pairs(pairs)} is decoded by mt's "
            "own search, one running batch")
    for tr, pair in zip(bound, pairs):
        if pair in models:
            raise MtError(f"-m: {pair[0]}-{pair[1]} is served twice")
        models[pair] = ServedModel(*pair, tr, worker, _memory(settings.memories, pair, log))
        aliases.update(zip(tr.direction, pair))
    warm = TextBatch(bound[0], [LineText("warm up", 0)], translator.cfg.decode)
    worker.submit(warm.todo).done.result()
    log(f"mt serve: {_pairs(pairs)} from {', '.join(spec.paths)} ({decoding(translator)})")


def reload(server: Server, log) -> None:
    """Every -m spec loaded again from its paths (an adapted checkpoint moved into place: SIGHUP), beside the
    models being served, then swapped in at once: a request that already has its model finishes on the old one,
    whose worker is let go once it has nothing left to answer. A model that fails to load leaves all as they were."""
    models, aliases = {}, {}
    try:
        for spec in server.specs:
            _load(spec, server.settings, server.decoder, server.metrics, models, aliases, lambda load: load(), log)
    except Exception as e:  # the old models stay; the new workers are idle and let go below
        log(f"mt serve: reload failed, still serving the models loaded before: {e}")
        _retire(server.decoder, {id(m.worker): m.worker for m in models.values()}.values())
        return
    old = {id(m.worker): m.worker for m in server.models.values()}.values()
    server.models, server.aliases = models, aliases
    log(f"mt serve: reloaded {_pairs(list(models))}")
    _retire(server.decoder, old)


def _retire(decoder: DecodeThread, workers) -> None:
    """Workers no request can reach any more, removed once they have answered what they accepted."""
    for worker in workers:
        while True:
            with decoder.lock:
                if worker.retire():
                    break
            time.sleep(0.05)
        decoder.call(worker.close)
