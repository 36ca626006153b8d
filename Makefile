# Every target works from a fresh clone with only python3 installed: the venv is made on demand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: test lab teacher bench student lite clean

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

# The widgets' browser bundle: built by the install (see pyproject.toml); rebuilt here when a
# JavaScript source changed since, so `make test` always tests what the sources say.
JS_SOURCES := $(wildcard widgets/src/*) widgets/build.mjs widgets/package.json widgets/package-lock.json
BUNDLE     := minigrad/widgets/static/stepper.js

# npm with Node.js: the system's (18+), else taken from PyPI into the venv (widgets/find_node.py).
NPM = $(CURDIR)/$(PY) $(CURDIR)/widgets/find_node.py --install npm

$(BUNDLE): $(JS_SOURCES) | $(VENV)/bin/python
	cd widgets && $(NPM) ci --include=dev --no-audit --no-fund && $(NPM) run build

test: $(VENV)/.test-installed $(BUNDLE)
	cd widgets && $(NPM) test
	MINIGRAD_DEBUG=1 $(PY) -m pytest

# `make lab` opens the student copies (student/, solutions removed), `make teacher` the full
# lessons with their solutions (solutions/). Both folders are written from lessons/ on first
# use, are git-ignored, and keep what is in them: running a lesson never changes a tracked
# file, and a student's work survives the next `make lab`.
# LAB_ARGS: more options for `jupyter lab` (e.g. LAB_ARGS="--no-browser --port=9999").
# Jupyter refuses to start as root without --allow-root; in a container one often is root.
define serve
	$(PY) tools/make_student.py $(1) lessons $(2)
	@if [ "$$(id -u)" = 0 ]; then \
	    echo "make $@: you are root (as in many containers), and Jupyter refuses to run as root" \
	         "without --allow-root, so it is added. As a normal user it is not needed."; \
	    root_flag=--allow-root; \
	fi; \
	set -x; exec $(VENV)/bin/jupyter lab $$root_flag $(LAB_ARGS) $(2)/
endef

lab: $(VENV)/.lab-installed $(BUNDLE)
	$(call serve,,student)

teacher: $(VENV)/.lab-installed $(BUNDLE)
	$(call serve,--solutions,solutions)

bench: $(VENV)/.bench-installed
	$(PY) benchmarks/chain.py
	$(PY) benchmarks/mlp.py
	$(PY) benchmarks/memory.py
	$(PY) benchmarks/digits.py
	$(PY) benchmarks/trace_cost.py
	$(PY) benchmarks/tape.py
	$(PY) benchmarks/checkpoint.py
	$(PY) benchmarks/transformer.py

# Only the student copies, without starting anything: needs python3 alone (no venv).
student:
	$(PYTHON) tools/make_student.py lessons student

# A JupyterLite site (Python in the browser, no server) with the lessons and the minigrad wheel.
LITE_VENV := .venv-lite
$(LITE_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(LITE_VENV)
	$(LITE_VENV)/bin/python -m pip install -q "jupyterlite-core>=0.6" "jupyterlite-pyodide-kernel>=0.6" "jupyter-server>=2.10" "nbformat>=5.9"
	touch $@

lite: $(LITE_VENV)/.installed $(BUNDLE)
	$(LITE_VENV)/bin/python tools/build_lite.py build/lite

clean:
	rm -rf $(VENV) .venv-lite build dist *.egg-info .pytest_cache .hypothesis
