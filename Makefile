# Developer entry points. `make demo` and `make test` set up everything they need (venv, build) themselves.
SHELL := /bin/bash
PY ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
BUILD ?= build
# Parallel compile jobs: every core by default.
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
# When this make run started: `make demo` reports its whole time (venv, build and demo) at the end.
MAKE_T0 := $(shell date +%s)
# Tools installed in the venv (cmake, ninja) come first.
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Serializes concurrent builds of the same tree (several shells or agents building at once).
LOCK := flock $(BUILD).lock

.PHONY: venv build test test-fast demo bench lint wheel clean wheel-test ort-matrix onnx-matrix fuzz test-asan test-isas

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
	@echo "make demo: $$(( $$(date +%s) - $(MAKE_T0) )) s in all (venv, build and demo)"

bench: build
	PYTHONPATH=python $(VPY) bench/run_all.py

lint: venv
	$(VENV)/bin/ruff check python tests bench models
	$(VENV)/bin/ruff format --check python tests bench models

# ---- release wheel (manylinux_2_28, zig), tests on the installed wheel, onnxruntime matrix -----------------------
# The interpreter the wheel is for (one wheel per CPython: _C is a pybind11 module). PY ?= python3 above.
ORT_PINNED := $(shell sed -n 's/^onnxruntime==//p' requirements-dev.txt)
ORT_MATRIX := $(shell grep -v '^\#' tools/ort_matrix.txt)
ONNX_MATRIX := $(shell grep -v '^\#' tools/onnx_matrix.txt)

# sdist + wheel from it (apt hidden, zig c++ -target x86_64-linux-gnu.2.28), auditwheel repair + show, into dist/
wheel:
	JOBS=$(JOBS) tools/build_wheel.sh $(PY) dist

# The whole suite against the shipped wheel in a fresh venv (pinned onnxruntime), not against python/
wheel-test: wheel
	tools/test_wheel.sh $(PY) dist $(ORT_PINNED) full

# The conformance tests against each onnxruntime of tools/ort_matrix.txt, each in its own venv
ort-matrix: wheel
	set -e; for v in $(ORT_MATRIX); do tools/test_wheel.sh $(PY) dist $$v conformance; done

# The conformance tests with each onnx of tools/onnx_matrix.txt (pyproject allows onnx>=1.16), pinned onnxruntime
onnx-matrix: wheel
	set -e; for v in $(ONNX_MATRIX); do tools/test_wheel.sh $(PY) dist $(ORT_PINNED) conformance $$v; done
# ---- end of the release wheel section ----------------------------------------------------------------------------

clean:
	rm -rf $(BUILD) dist python/ortquant/*.so

# ---- serving and scale-out: Triton replay on every onnxruntime Triton ships, PyTriton, Ray -----------------------
# `make test-serving` runs the three; each step prints its wall time. Downloads are cached: the onnxruntime releases
# in ~/.cache/ortquant/ort-libs (ORTQUANT_ORT_LIBS_DIR), the PyTriton and Ray venvs in $(SERVING_VENVS).
SERVING_VENVS ?= $(HOME)/.cache/ortquant/venvs
# ORTQUANT_REQUIRE_SERVING=1: in these venvs a missing package is an error, not a skip.
SERVING_ENV := PYTHONPATH=python:tests ORTQUANT_BUILD_DIR=$(abspath $(BUILD)) ORTQUANT_REQUIRE_SERVING=1
# The stamps name what is installed, so a changed requirement reinstalls into a kept venv.
PYTRITON_STAMP := $(SERVING_VENVS)/pytriton/.stamp-pytriton-0.7.0-tritonclient-2.73.0
RAY_STAMP := $(SERVING_VENVS)/ray/.stamp-ray-data-serve-2.60.0
SERVING_PIP := -q --disable-pip-version-check
# Timed and bounded: `timeout` stops a hung server or cluster.
define timed
@start=$$(date +%s); timeout $(2) $(3); rc=$$?; echo "$(1): $$(( $$(date +%s) - start )) s (exit $$rc)"; exit $$rc
endef

.PHONY: test-serving test-ort-versions test-pytriton test-ray

test-ort-versions: build
	$(call timed,test-ort-versions,900,env ORTQUANT_FETCH_ORT=1 $(SERVING_ENV) $(VPY) -m pytest -q -p no:cacheprovider tests/host/test_ort_versions.py)

$(PYTRITON_STAMP):
	$(PY) -m venv $(SERVING_VENVS)/pytriton
	$(SERVING_VENVS)/pytriton/bin/pip install $(SERVING_PIP) nvidia-pytriton==0.7.0 "tritonclient[http,grpc]==2.73.0" \
	  onnxruntime==1.31.1 onnx==1.23.2 numpy pytest
	touch $@

test-pytriton: build $(PYTRITON_STAMP)
	$(call timed,test-pytriton,600,env $(SERVING_ENV) $(SERVING_VENVS)/pytriton/bin/python -m pytest -q -s -p no:cacheprovider tests/serving)

$(RAY_STAMP):
	$(PY) -m venv $(SERVING_VENVS)/ray
	$(SERVING_VENVS)/ray/bin/pip install $(SERVING_PIP) "ray[data,serve]==2.60.0" onnxruntime==1.31.1 onnx==1.23.2 numpy pytest
	touch $@

test-ray: build $(RAY_STAMP)
	$(call timed,test-ray,600,env $(SERVING_ENV) $(SERVING_VENVS)/ray/bin/python -m pytest -q -s -p no:cacheprovider tests/scaleout)

test-serving:
	$(call timed,test-serving,1800,$(MAKE) --no-print-directory test-ort-versions test-pytriton test-ray)
# ---- every kernel path on any x86-64 CPU ---------------------------------------------------------------------
# `make test-isas`: build-isas compiles the AVX-512, AVX-512 VNNI and AVX-VNNI kernels against SIMDe with AVX2 flags
# (CMake option ORTQUANT_EMULATE_ISAS; only _C and libortquant.so), and tools/test_isas.py runs the ISA-dependent
# tests of ISAS_TESTS on every path this build selects (the CPU's natively, the others emulated), bit-exact against
# the scalar oracle; its last lines are `<path>: N passed`.
ISAS_BUILD ?= build-isas
ISAS_TESTS ?= tests/qonnx/test_quant.py tests/qonnx/test_quant_pow2.py tests/qonnx/test_trunc.py \
  tests/qonnx/test_bipolar_quant.py tests/qonnx/test_float_quant.py tests/qonnx/test_float16.py \
  tests/qonnx/test_multithreshold.py tests/qonnx/test_xnorpopcount.py tests/qonnx/test_maxpoolnhwc.py \
  tests/qonnx/test_quantavgpool2d.py tests/qonnx/test_long_rows.py tests/ngraph/test_quantize.py \
  tests/ngraph/test_dequantize.py \
  tests/integer/test_qlayer.py tests/integer/test_rescale_codes.py tests/integer/test_models_integer.py \
  tests/linger/test_activation.py \
  tests/linger/test_elementwise.py tests/linger/test_gemm.py tests/linger/test_linear.py tests/linger/test_conv.py \
  tests/linger/test_conv_grid.py tests/linger/test_conv_quads.py tests/integer/test_qconv_quads.py \
  tests/transforms/test_integer_maxpool.py tests/transforms/test_integer_codes.py \
  tests/transforms/test_integer_leaky_relu.py tests/transforms/test_integer_code_flow.py \
  tests/transforms/test_integer_channels_last.py \
  tests/linger/test_convtranspose.py tests/linger/test_bmm.py tests/linger/test_matrix_conformance.py \
  tests/linger/test_lstm.py tests/linger/test_gru.py
test-isas: venv
	@flock $(ISAS_BUILD).lock bash -c 'set -e; \
	  if [ ! -f $(ISAS_BUILD)/CMakeCache.txt ]; then \
	    cmake -S . -B $(ISAS_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release -DORTQUANT_EMULATE_ISAS=ON \
	      -DORTQUANT_INPLACE=OFF -DORTQUANT_BUILD_HOST_TEST=OFF \
	      -DPython_EXECUTABLE=$(abspath $(VPY)) -Dpybind11_DIR=$$($(VPY) -m pybind11 --cmakedir) >/dev/null; \
	  fi; \
	  cmake --build $(ISAS_BUILD) -j $(JOBS) --target _C ortquant; \
	  rm -rf $(ISAS_BUILD)/py && mkdir -p $(ISAS_BUILD)/py && cp -r python/ortquant $(ISAS_BUILD)/py/ && \
	  rm -f $(ISAS_BUILD)/py/ortquant/*.so && cp $(ISAS_BUILD)/libortquant.so $(ISAS_BUILD)/_C*.so $(ISAS_BUILD)/py/ortquant/'
	PYTHONPATH=$(ISAS_BUILD)/py:tests ORTQUANT_TEST_INSTALLED=1 ORTQUANT_BUILD_DIR=$(abspath $(ISAS_BUILD)) \
	  $(VPY) tools/test_isas.py $(ISAS_TESTS)

# ---- hardening: fuzz campaigns and the sanitizer run ----------------------------------------------------------
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
  tests/qonnx/test_im2col.py tests/qonnx/test_trunc.py tests/ngraph/test_dequantize.py tests/fuzz/test_fuzz.py \
  tests/qonnx/test_wide_params.py tests/integer/test_qlayer.py tests/integer/test_rescale_codes.py \
  tests/linger/test_convtranspose.py tests/test_high_rank.py \
  tests/integer/test_qconv_quads.py tests/transforms/test_integer_maxpool.py tests/transforms/test_integer_residual.py \
  tests/transforms/test_integer_depth_to_space.py tests/transforms/test_integer_codes.py \
  tests/transforms/test_integer_leaky_relu.py tests/transforms/test_integer_code_flow.py \
  tests/transforms/test_integer_avgpool_codes.py tests/transforms/test_integer_channels_last.py \
  tests/transforms/test_integer_flatten.py tests/transforms/test_integer_chain.py
# Not in the set: tests/qonnx/test_float_quant_wide.py (float64 FloatQuant). Its time is qonnx's Python reference
# (69 s normally, about 8 min under ASan, which put CI over its 45-minute aim); it ran clean under ASan+UBSan by
# hand (240 tests with test_float_quant.py), and the fuzz corpus above has a float64 FloatQuant seed.
# Not in the set either: tests/fuzz/test_fuzz_python.py (the Python-layer fuzz target: it tests Python code, which
# ASan does not instrument). Under ASan its forked children hit a heap-use-after-free inside onnxruntime's own
# pybind module at process exit (an onnxruntime thread copying a string that exit handlers freed; every frame is in
# onnxruntime_pybind11_state.so, none in ortquant), seen 2026-11-25 with onnxruntime 1.31.1; `make test` runs it.
# libstdc++ is preloaded too: Python does not link it, and ASan's __cxa_throw interceptor needs it at start-up.
# pytest's `pythonpath` option (pyproject.toml) puts python/ first; the run overrides it so that the tests import the
# sanitized build's package (tests/test_hardening.py checks). The fuzz corpus runs its first 600 cases here (all
# 2000 in `make test`): the instrumented build is about 5x slower.
ASAN_ENV := ORTQUANT_SANITIZED=1 ORTQUANT_FUZZ_CASES=600 LD_PRELOAD="$$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so)" \
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
	$(ASAN_ENV) $(VPY) -m pytest -q -p no:cacheprovider -o pythonpath="$(ASAN_BUILD)/py tests" $(ASAN_TESTS)
