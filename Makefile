# `make test` and `make demo` each set up everything on a fresh machine: a virtualenv in .venv,
# the CPU build of torch (pinned so pip does not pull a multi-GB CUDA build), and this project with its
# dev and plot extras (the tests draw pictures and write TensorBoard logs).
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.mt-installed

.PHONY: test test-fast demo setup clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,plot,ct2,serve]"
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

demo: $(STAMP)
	$(BIN)/python scripts/demo.py

clean:
	rm -rf $(VENV) runs/demo
