# Developer entry points. `make demo` and `make test` set up everything they need (venv, build) themselves.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
BUILD ?= build
JOBS ?= 2
# Tools installed in the venv (cmake, ninja) come first.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Serializes concurrent builds of the same tree (several shells or agents building at once).
LOCK := flock $(BUILD).lock

.PHONY: venv build test test-fast demo bench lint wheel clean fuzz test-asan

$(VENV)/.stamp: requirements-dev.txt
	$(PY) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip
	$(VPY) -m pip install -q -r requirements-dev.txt
	touch $@

venv: $(VENV)/.stamp

build: venv
	@$(LOCK) bash -c 'set -e; \
	  if [ ! -f $(BUILD)/CMakeCache.txt ]; then \
	    cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release \
	      -DPython_EXECUTABLE=$(abspath $(VPY)) -Dpybind11_DIR=$$($(VPY) -m pybind11 --cmakedir) >/dev/null; \
	  fi; \
	  cmake --build $(BUILD) -j $(JOBS)'

test: build
	PYTHONPATH=python ORTQUANT_BUILD_DIR=$(abspath $(BUILD)) $(VPY) -m pytest -q tests

demo: build
	PYTHONPATH=python $(VPY) models/demo.py

bench: build
	PYTHONPATH=python $(VPY) bench/run_all.py

lint: venv
	$(VENV)/bin/ruff check python tests bench models
	$(VENV)/bin/ruff format --check python tests bench models

wheel: venv
	$(VPY) -m pip wheel . -w dist --no-deps

clean:
	rm -rf $(BUILD) dist python/ortquant/*.so

# ---- hardening (issue 9): fuzz campaigns and the sanitizer run -----------------------------------------------
# `make fuzz N=50000 SEED=1`: a fuzz campaign (tests/fuzz), report in fuzz-report.json; exit 1 on a bad outcome.
N ?= 10000
SEED ?= 1
fuzz: build
	PYTHONPATH=python $(VPY) tests/fuzz/fuzz_harness.py --cases $(N) --seed $(SEED) --jobs $(JOBS) --out fuzz-report.json

# `make test-asan`: builds build-asan with -fsanitize=address,undefined and runs ASAN_TESTS (a stated
# representative part of the suite, plus the fixed-seed fuzz corpus) under it; any report fails the run.
ASAN_BUILD ?= build-asan
ASAN_TESTS ?= tests/test_hardening.py tests/test_lifecycle.py tests/test_library.py tests/linger/test_conformance.py \
  tests/linger/test_matrix_conformance.py tests/linger/test_errors.py tests/linger/test_conv.py \
  tests/qonnx/test_im2col.py tests/qonnx/test_trunc.py tests/ngraph/test_dequantize.py tests/fuzz
# libstdc++ is preloaded too: Python does not link it, and ASan's __cxa_throw interceptor needs it at start-up.
ASAN_ENV := LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so)" \
  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:exitcode=86:allocator_may_return_null=1:max_allocation_size_mb=6144 \
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:exitcode=86
test-asan: venv
	@flock $(ASAN_BUILD).lock bash -c 'set -e; \
	  if [ ! -f $(ASAN_BUILD)/CMakeCache.txt ]; then \
	    cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DORTQUANT_SANITIZE=ON \
	      -DORTQUANT_INPLACE=OFF -DORTQUANT_BUILD_HOST_TEST=OFF \
	      -DPython_EXECUTABLE=$(abspath $(VPY)) -Dpybind11_DIR=$$($(VPY) -m pybind11 --cmakedir) >/dev/null; \
	  fi; \
	  cmake --build $(ASAN_BUILD) -j $(JOBS); \
	  rm -rf $(ASAN_BUILD)/py && mkdir -p $(ASAN_BUILD)/py && cp -r python/ortquant $(ASAN_BUILD)/py/ && \
	  rm -f $(ASAN_BUILD)/py/ortquant/*.so && cp $(ASAN_BUILD)/libortquant.so $(ASAN_BUILD)/_C*.so $(ASAN_BUILD)/py/ortquant/'
	$(ASAN_ENV) PYTHONPATH=$(ASAN_BUILD)/py $(VPY) -m pytest -q -p no:cacheprovider $(ASAN_TESTS)
