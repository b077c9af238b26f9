# Two entry points for a fresh machine: `make pretrain` and `make test`.
# Each creates .venv and installs the pinned set (constraints.txt) the first time.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup setup-test pretrain finetune test lint viz mlflow-ui

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -c constraints.txt -e ".[test,hf]"
	touch $@

setup: $(VENV)/.installed

setup-test: $(VENV)/.installed-test

pretrain: setup
	$(BIN)/kedro run --pipeline pretrain

finetune: setup
	$(BIN)/kedro run --pipeline finetune_glue

test: setup-test
	$(BIN)/pytest

lint: setup-test
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

viz: setup
	$(BIN)/kedro viz run

mlflow-ui: setup
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(BIN)/mlflow ui \
		--backend-store-uri sqlite:///mlflow.db --port 5000 --workers 1
