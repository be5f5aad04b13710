# horizonbench: `make demo` and `make test` are all a new user needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: install demo test lint bench clean

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

demo: install
	$(BIN)/horizonbench demo --out runs/demo

lint: install
	$(BIN)/ruff check src tests benchmarks deployment
	$(BIN)/ruff format --check src tests benchmarks deployment

test: install lint
	$(BIN)/python -m pytest -q --durations=15 -n 2 --dist loadfile

bench: install
	$(BIN)/python benchmarks/run.py
	$(BIN)/python benchmarks/scoring.py
	$(BIN)/python benchmarks/evaluation.py
	$(BIN)/python benchmarks/puzzles.py
	$(BIN)/python benchmarks/worlds.py
	$(BIN)/python benchmarks/harness.py
	$(BIN)/python benchmarks/analysis_scale.py
	$(BIN)/python benchmarks/overhead.py
	$(BIN)/python benchmarks/scale.py
	$(BIN)/python benchmarks/puzzle_progress.py
	$(BIN)/python benchmarks/calibration.py

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache .hypothesis
