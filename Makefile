# Both targets bootstrap their own .venv from nothing: make demo installs
# drift alone, make test adds the test tools (pytest, playwright, ...).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
BASE := $(VENV)/.drift-installed
TEST := $(VENV)/.drift-test-installed

.PHONY: demo test lint bench clean

$(BASE): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@# A venv made before the rename holds drift under its old distribution name.
	@$(PY) -m pip uninstall --quiet --yes drift >/dev/null 2>&1 || true
	$(PIP) -e .
	touch $(BASE)

$(TEST): $(BASE)
	$(PIP) -e '.[test]'
	touch $(TEST)

demo: $(BASE)
	$(VENV)/bin/drift demo

test: $(TEST)
	$(PY) -m pytest -q

lint: $(TEST)
	$(VENV)/bin/ruff check drift tests benchmarks migrations tools
	$(VENV)/bin/ruff format --check drift tests migrations tools
	$(VENV)/bin/mypy

bench: $(BASE)
	$(PY) benchmarks/bench_record.py

clean:
	rm -rf $(VENV) dist build .pytest_cache .hypothesis test-artifacts
