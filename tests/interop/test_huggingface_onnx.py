"""The Hugging Face export beyond transformers: Optimum's ONNX exporter converts it, onnxruntime decodes it
(ORTModelForSeq2SeqLM) as mt does, and the page in examples/browser translates with it in Debian's headless
chromium through transformers.js, everything served from a local HTTP server (no CDN, no Hub). One ONNX export
serves both."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from mt.decoding.model_backend import load_model_translator
from mt.config import DecodeConfig, TokenizerConfig
from mt.interop.huggingface import export_huggingface
from mt.data.tokenizer import train_tokenizer
from tests.conftest import DATA, ROOT, requests_of
from tests.interop.conftest import POSITIONS, make_checkpoint

BROWSER = ROOT / "examples" / "browser"
LINES = (DATA / "dev.de").read_text(encoding="utf-8").splitlines()[:24]
PAGE_LINES = LINES[:3]
PAGE_MAX_NEW_TOKENS = 64  # index.html's: tokens after the decoder start, EOS included
# transformers.js loads these of a model folder (onnx/ as Optimum names the files)
BROWSER_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")
ONNX_FILES = ("encoder_model.onnx", "decoder_model_merged.onnx")
# Optimum and onnxruntime with the transformers they need, installed apart by the Makefile (.venv/onnx-deps).
ONNX_DEPS = Path(sys.prefix) / "onnx-deps"
ONNX_ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ONNX_DEPS), str(ROOT)])}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(mt's translator, the Hugging Face directory, Optimum's ONNX directory) of a small joint-vocabulary
    model with the paper's options."""
    folder = tmp_path_factory.mktemp("onnx")
    train = [(DATA / f"sample-2k.{side}").read_text().splitlines() for side in ("de", "en")]
    joint = train_tokenizer(train[0] + train[1], TokenizerConfig(vocab_size=400))
    checkpoint = make_checkpoint(folder / "model.pt", {True: (joint, joint)}, True)
    export_huggingface(checkpoint, folder / "hf")
    done = subprocess.run([sys.executable, "-m", "optimum.exporters.onnx", "--model", str(folder / "hf"), "--task",
                           "text2text-generation-with-past", str(folder / "onnx")], capture_output=True, text=True,
                          env=ONNX_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    return load_model_translator(checkpoint, "cpu"), folder / "hf", folder / "onnx"


def _mt_greedy(tr, lines: list[str], max_len: int) -> list[list[int]]:
    sources = tr.src_tokenizer.encode(lines)
    with torch.inference_mode():
        return [h[0].tokens for h in tr.backend.search(requests_of(sources, DecodeConfig(beam_size=1),
                                                                    max_len=max_len, max_positions=POSITIONS))]


ORT_GREEDY = """
import json, sys
from optimum.onnxruntime import ORTModelForSeq2SeqLM
from transformers import MarianTokenizer
hf, onnx, lines = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
model, tokenizer = ORTModelForSeq2SeqLM.from_pretrained(onnx), MarianTokenizer.from_pretrained(hf)
out = model.generate(**tokenizer(lines, return_tensors="pt", padding=True), num_beams=1, do_sample=False,
                     max_new_tokens=31)
print(json.dumps([row[1:].tolist() for row in out]))
"""


def test_onnxruntime_greedy_is_mt_token_for_token(exported):
    tr, hf, onnx = exported
    done = subprocess.run([sys.executable, "-c", ORT_GREEDY, str(hf), str(onnx), json.dumps(LINES)],
                          capture_output=True, text=True, env=ONNX_ENV)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = [tokens[:tokens.index(3)] if 3 in tokens else tokens for tokens in json.loads(done.stdout)]
    ours = _mt_greedy(tr, LINES, 30)
    assert theirs == ours
    assert len({len(t) for t in ours}) > 3, "outputs of varied lengths"


class _Files(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".mjs": "text/javascript",
                      ".js": "text/javascript", ".wasm": "application/wasm"}

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def site(exported, tmp_path):
    """The URL of index.html served with node_modules/ and models/mt/ from a local server."""
    _, hf, onnx = exported
    assert (BROWSER / "node_modules" / "@huggingface" / "transformers").is_dir(), \
        "examples/browser/node_modules missing: `make setup` runs npm ci there"
    root = tmp_path / "site"
    (root / "models" / "mt" / "onnx").mkdir(parents=True)
    (root / "index.html").symlink_to(BROWSER / "index.html")
    (root / "node_modules").symlink_to(BROWSER / "node_modules")
    for name in BROWSER_FILES:
        shutil.copy(hf / name, root / "models" / "mt" / name)
    for name in ONNX_FILES:
        shutil.copy(onnx / name, root / "models" / "mt" / "onnx" / name)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Files, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/index.html"
    finally:
        server.shutdown()


def _status(driver) -> str:
    return driver.find_element(By.ID, "status").text


def test_the_page_translates_as_mt_in_chromium(exported, site, browser):
    """transformers.js (tokenizer.json, the ONNX encoder and merged decoder, onnxruntime-web's wasm) gives mt's
    greedy translation of each line, as text."""
    tr = exported[0]
    browser.get(site)
    WebDriverWait(browser, 240).until(lambda d: _status(d) != "loading the model…")
    assert _status(browser) == "ready"
    for line, ours in zip(PAGE_LINES, _mt_greedy(tr, PAGE_LINES, PAGE_MAX_NEW_TOKENS - 1)):
        source = browser.find_element(By.ID, "source")
        source.clear()
        source.send_keys(line)
        browser.find_element(By.ID, "translate").click()
        WebDriverWait(browser, 120).until(lambda d: _status(d) in ("done",) or _status(d).startswith("error"))
        assert _status(browser) == "done"
        assert browser.find_element(By.ID, "output").text == tr.tgt_tokenizer.decode(ours)
