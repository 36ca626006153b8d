# Every target works from a fresh clone with only python3 installed: the venv is made on demand.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: test test-oldest lab teacher bench student lite class clean

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
JS_SOURCES := $(shell find widgets/src -type f) widgets/build.mjs widgets/package.json widgets/package-lock.json
BUNDLE     := minigrad/widgets/static/stepper.js

# npm with Node.js: the system's (18+), else taken from PyPI into the venv (widgets/find_node.py).
NPM = $(CURDIR)/$(PY) $(CURDIR)/widgets/find_node.py --install npm

$(BUNDLE): $(JS_SOURCES) | $(VENV)/bin/python
	cd widgets && $(NPM) ci --include=dev --no-audit --no-fund && $(NPM) run build

# nbgrader (the `grading` extra) lives in a venv of its own: it installs JupyterLab and server
# extensions (formgrader, assignment list, a validate button) that would otherwise load into the
# JupyterLab of `make lab` and of the browser tests. Its kernel grades the lessons, so minigrad
# is installed there too (the bundle is built first, so the install does not build it again).
GRADING_VENV := .venv-grading
$(GRADING_VENV)/.installed: pyproject.toml | $(BUNDLE)
	$(PYTHON) -m venv $(GRADING_VENV)
	$(GRADING_VENV)/bin/python -m pip install -e '.[grading]'
	touch $@

# PYTHONUTF8=1: files the tests read (lessons, README, pages) are UTF-8 whatever the locale says.
# MINIGRAD_NBGRADER: tests/test_nbgrader.py grades the lessons with this nbgrader (never skips).
# Two pytest-xdist workers: a test file's tests stay on one worker, all browser tests on one, the
# longest first (tests/conftest.py); the browser tests and nbgrader's course run beside the rest.
TEST_WORKERS ?= 2
test: $(VENV)/.test-installed $(BUNDLE) $(GRADING_VENV)/.installed
	cd widgets && $(NPM) test
	MINIGRAD_NBGRADER=$(CURDIR)/$(GRADING_VENV)/bin/nbgrader MINIGRAD_DEBUG=1 PYTHONUTF8=1 \
	    $(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile
	$(MAKE) --no-print-directory test-oldest

# The engine tests again with the oldest numpy that pyproject.toml accepts (numpy 1.x promotes
# float32 scalars by value, numpy 2 does not), in a small venv of its own: numpy and the test
# tools only, minigrad from this folder (PYTHONPATH, so no widget build). Left out: the test
# files that need Jupyter, the widgets, Node.js or a browser (listed here; a new one fails to
# import there, loudly). About a minute. Which numpy: tools/oldest_numpy.py (1.26.4, or on a
# Python too new for its wheels the first numpy that has them); tests/test_dtype_promotion.py
# checks it against pyproject.toml.
OLDEST_VENV   := .venv-oldest
OLDEST_NUMPY   = $(shell $(PYTHON) tools/oldest_numpy.py)
NEEDS_JUPYTER := tests/browser tests/test_aotview.py tests/test_binder.py tests/test_lessons.py \
                 tests/test_lite.py tests/test_make_lab.py tests/test_measure_lessons.py \
                 tests/test_memory_compare.py tests/test_names.py tests/test_nbgrader.py \
                 tests/test_no_node.py tests/test_readme.py tests/test_refold.py \
                 tests/test_tapeview.py tests/test_trace_agrees_with_engine.py \
                 tests/test_widget_collapse.py tests/test_widget_dot.py \
                 tests/test_widgets_python.py

$(OLDEST_VENV)/.installed: Makefile tools/oldest_numpy.py
	$(PYTHON) -m venv $(OLDEST_VENV)
	$(OLDEST_VENV)/bin/python -m pip install -q "numpy==$(OLDEST_NUMPY)" "pytest>=8.0" \
	    "hypothesis>=6.100" "jsonschema>=4.0"
	touch $@

test-oldest: $(OLDEST_VENV)/.installed
	MINIGRAD_DEBUG=1 PYTHONUTF8=1 PYTHONPATH=$(CURDIR) $(OLDEST_VENV)/bin/python -m pytest -q -m 'not build' \
	    $(addprefix --ignore=,$(NEEDS_JUPYTER))

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

# A JupyterLite site (Python in the browser, no server) with the student copies, the minigrad
# wheel and the widgets' front-end (docs/teaching.md).
LITE_VENV := .venv-lite
$(LITE_VENV)/.installed: tools/lite-requirements.txt
	$(PYTHON) -m venv $(LITE_VENV)
	$(LITE_VENV)/bin/python -m pip install -q -r tools/lite-requirements.txt
	touch $@

lite: $(LITE_VENV)/.installed $(BUNDLE)
	$(LITE_VENV)/bin/python tools/build_lite.py build/lite

# An nbgrader course folder, class/ (git-ignored): every lesson as an assignment, its nbgrader
# cell metadata generated from the lesson (tools/make_class.py), then released by nbgrader into
# class/release/ (solutions replaced by stubs). The instructor's next commands: docs/grading.md.
# `make clean` leaves class/ alone: it holds the gradebook and the submissions.
# nbgrader runs `alembic` by name, so its venv's bin goes first on PATH (as when activated).
class: $(GRADING_VENV)/.installed
	$(PYTHON) tools/make_class.py lessons class
	cd class && PATH="$(CURDIR)/$(GRADING_VENV)/bin:$$PATH" nbgrader generate_assignment --force '*'

clean:
	rm -rf $(VENV) .venv-lite $(OLDEST_VENV) $(GRADING_VENV) build dist *.egg-info .pytest_cache .hypothesis
