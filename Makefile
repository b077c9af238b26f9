# Two entry points for a fresh machine: `make pretrain` and `make test`.
# Each creates .venv and installs the pinned set (constraints.txt) the first time.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup setup-test pretrain pretrain-budget finetune test lint viz mlflow-ui serve notebook

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(BIN)/pip install --quiet -c constraints.txt -e ".[test,hf]"
	touch $@

# Linting needs only ruff, at the pinned version: no project install.
$(VENV)/.installed-lint: $(BIN)/python constraints.txt
	$(BIN)/pip install --quiet -c constraints.txt ruff
	touch $@

$(VENV)/.installed-notebook: $(VENV)/.installed
	$(BIN)/pip install --quiet -c constraints.txt -e ".[notebook]"
	touch $@

setup: $(VENV)/.installed

setup-test: $(VENV)/.installed-test

pretrain: setup
	$(BIN)/kedro run --pipeline pretrain

# The budget model: conf/budget (Wikipedia from ../shared); an hour or more on a 2-core CPU, see docs/training.md.
pretrain-budget: setup
	$(BIN)/kedro run --env budget --params data_dir=data/budget

finetune: setup
	$(BIN)/kedro run --pipeline finetune_glue

# --durations lists the slowest tests in every run (CI's log too): the suite should stay near 10 minutes
test: setup-test
	$(BIN)/pytest -n 2 --dist loadgroup --durations=15

lint: $(VENV)/.installed-lint
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

# Jupyter Lab on notebooks/ (tour.ipynb) with the project's kernel, Kedro (bert_pipeline), which
# loads the project's catalog and MLflow store. Its kernels start in notebooks/, where Kedro would
# not find conf/logging.yml: named here.
notebook: $(VENV)/.installed-notebook
	KEDRO_LOGGING_CONFIG=$(CURDIR)/conf/logging.yml $(BIN)/kedro jupyter lab $(ARGS)

viz: setup
	$(BIN)/kedro viz run

# The model-training view of the UI (MLflow 3.17 opens its GenAI view otherwise).
mlflow-ui: setup
	@echo "open http://127.0.0.1:5000/#/experiments?workflowType=machine_learning"
	MLFLOW_SERVER_ENABLE_JOB_EXECUTION=false $(BIN)/mlflow ui \
		--backend-store-uri sqlite:///mlflow.db --port 5000 --workers 1

# A registered model over HTTP (docs/mlflow.md): make serve MODEL=models:/bert-pretrained@best
# MODEL_CONFIG replaces logged settings of the model, e.g. its request limits:
# make serve MODEL_CONFIG='{"max_rows": 16, "max_text_chars": 2000}'
MODEL ?= models:/bert-pretrained/latest
MODEL_CONFIG ?= {}
serve: setup
	PATH="$(CURDIR)/$(BIN):$$PATH" MLFLOW_TRACKING_URI=sqlite:///mlflow.db \
		SERVING_MODEL_CONFIG='$(MODEL_CONFIG)' $(BIN)/mlflow models serve \
		-m $(MODEL) --env-manager local --host 127.0.0.1 --port 5001
