# Every target works from a fresh clone with only python3 installed: the venv is made on demand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: test lab bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

# Reinstall when the project's metadata changes (new extras or dependencies).
$(VENV)/.test-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[test]'
	touch $@

$(VENV)/.lab-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[lab]'
	touch $@

$(VENV)/.bench-installed: pyproject.toml | $(VENV)/bin/python
	$(PIP) install -e '.[bench]'
	touch $@

test: $(VENV)/.test-installed
	MINIGRAD_DEBUG=1 $(PY) -m pytest

lab: $(VENV)/.lab-installed
	$(VENV)/bin/jupyter lab lessons/

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/chain.py
	$(PY) benchmarks/mlp.py
	$(PY) benchmarks/memory.py
	$(PY) benchmarks/digits.py
	$(PY) benchmarks/trace_cost.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
