# horizonbench: `make demo` and `make test` are all a new user needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install install-train demo test lint bench clean

# The venv is rebuilt when the project's declared dependencies or the lock change; the
# install also migrates Prefect's empty database once per Prefect version (the template
# new Prefect homes start from), so even the first run on a machine starts quickly.
# requirements.lock pins every transitive version we test with (pip constraints).
$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev]'
	$(BIN)/python -m horizonbench.cli.prefect_server template
	touch $(STAMP)

install: $(STAMP)

# The `train` extra (PyTorch CPU 2.13.0 and transformers, about 1.2 GB): the tests train
# tiny sequence models; the demo never needs it
TRAIN_STAMP := $(VENV)/.train-stamp
$(TRAIN_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c requirements.lock -e '.[dev,train]'
	touch $(TRAIN_STAMP)

install-train: $(TRAIN_STAMP)

demo: install
	$(BIN)/horizonbench demo --out runs/demo

lint: install
	$(BIN)/ruff check src tests benchmarks deployment
	$(BIN)/ruff format --check src tests benchmarks deployment

test: install-train lint
	$(BIN)/python -m pytest -q --durations=15 -n 2 --dist loadfile

# benchmarks/run.py holds the list of benchmarks (and runs each in its own process)
bench: install-train
	$(BIN)/python benchmarks/run.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis
