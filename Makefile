# `make test` and `make demo` each set up everything on a fresh machine: a virtualenv in .venv,
# the CPU build of torch (pinned so pip does not pull a multi-GB CUDA build), and this project with its
# dev and plot extras (the tests draw pictures and write TensorBoard logs), and transformers.js for the browser
# example (examples/browser, from package-lock.json; its test loads it in chromium).
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.mt-installed
BROWSER := examples/browser/node_modules/.package-lock.json
ONNX_DEPS := $(VENV)/onnx-deps
LT_VENV := .venv-lt
LT_STAMP := $(LT_VENV)/.installed

.PHONY: test test-fast demo setup clean system-packages

setup: $(STAMP) $(BROWSER) $(ONNX_DEPS) $(LT_STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,plot,ct2,serve,hf,documents,pdf]"
	touch $(STAMP)

# Optimum's ONNX exporter (the onnx extra) needs transformers < 4.58, older than the tests' own: the tests run it
# from this folder of its own (pip --target, no dependencies but these, torch and numpy taken from the venv).
$(ONNX_DEPS): $(STAMP)
	$(BIN)/python -m pip install -q --no-deps --target $(ONNX_DEPS) optimum-onnx==0.1.0 optimum==2.1.0 \
		transformers==4.57.6 huggingface_hub==0.36.2 tokenizers==0.22.2 datasets==5.0.1 onnx==1.23.2 \
		onnxruntime==1.32.0 ml_dtypes==0.6.0 flatbuffers==25.12.19

# LibreTranslate (and the argostranslate it runs) in a virtualenv of its own, as users install it: the tests install
# and serve mt's Argos packages with it, and scripts/bench_serve.py measures it (scripts/libretranslate_offline.py).
$(LT_STAMP):
	test -x $(LT_VENV)/bin/python || $(PYTHON) -m venv $(LT_VENV)
	$(LT_VENV)/bin/python -m pip install -q libretranslate==1.9.6
	touch $(LT_STAMP)

# --ignore-scripts: onnxruntime-node's install script downloads from nuget.org; the page needs onnxruntime-web only
$(BROWSER): examples/browser/package-lock.json
	cd examples/browser && npm ci --ignore-scripts --no-audit --no-fund

# The system tools the tests need (chromium and chromedriver, node and npm, a C compiler, gettext, Qt's lrelease):
# apt-get installs those missing when run as root; otherwise the script names the apt-get line to run.
system-packages:
	bash scripts/system_packages.sh $(PYTHON)

# Every library's matrix code capped at AVX2 (no AVX-512, no VNNI), as on an AMD EPYC up to Zen 3 or an older Intel
# CPU, with CTranslate2 on oneDNN as it is on AMD: int8 products saturate there and not on a VNNI CPU.
AVX2_ONLY := ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 FBGEMM_ENABLE_INSTRUCTIONS=AVX2 \
	ATEN_CPU_CAPABILITY=avx2 CT2_FORCE_CPU_ISA=AVX2 CT2_USE_MKL=0

# Two workers (pytest-xdist) for everything but the tests that measure time or memory, which then run alone; then
# the int8 tests again on an AVX2-only CPU.
test: system-packages $(STAMP) $(BROWSER) $(ONNX_DEPS) $(LT_STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not timing"
	$(BIN)/python -m pytest -q -m timing
	$(AVX2_ONLY) $(BIN)/python -m pytest -q -n 2 -m int8

test-fast: system-packages $(STAMP) $(BROWSER) $(ONNX_DEPS) $(LT_STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow"

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

clean:
	rm -rf $(VENV) $(LT_VENV) runs/demo examples/browser/node_modules
