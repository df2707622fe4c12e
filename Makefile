# Both targets bootstrap their own .venv from nothing.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.drift-installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/drift demo

test: $(STAMP)
	$(PY) -m pytest -q

lint: $(STAMP)
	$(VENV)/bin/ruff check drift tests benchmarks migrations
	$(VENV)/bin/ruff format --check drift tests migrations
	$(VENV)/bin/mypy

bench: $(STAMP)
	$(PY) benchmarks/bench_record.py

clean:
	rm -rf $(VENV) dist build .pytest_cache .hypothesis
