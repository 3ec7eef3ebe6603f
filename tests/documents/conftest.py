"""What the document tests share: a small random model that writes a few pieces per sentence (an imported
Marian model, tests/marian_models.py), the sentences they translate, what `mt translate` gives each, and a
server for LibreTranslate's file API."""

from __future__ import annotations

import pytest

from tests.conftest import DATA, run_mt
from tests.marian_models import few_words_model

SENTENCES = [line for line in (DATA / "dev.de").read_text(encoding="utf-8").splitlines()
             if line.endswith(".") and line.count(".") == 1 and 4 <= len(line.split()) <= 12][:6]


@pytest.fixture(scope="package")  # read only: one per worker for every document test
def model(spm_models, tmp_path_factory):
    return few_words_model(tmp_path_factory.mktemp("documents"), spm_models["both"])


def plain(model, sentences: list[str]) -> list[str]:
    """What `mt translate` gives each sentence as a line."""
    return run_mt("translate", "-c", model, input="\n".join(sentences) + "\n").stdout.splitlines()


LAUGHS = (b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
          b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]><d>&c;</d>')


# ---------------------------------------------------------------- LibreTranslate's file API through mt serve


@pytest.fixture(scope="module")
def file_server(model):
    from tests.conftest import RunningServer

    running = RunningServer(model, "--max-file-bytes", str(2 << 20))
    yield running
    assert running.stop() == 0
