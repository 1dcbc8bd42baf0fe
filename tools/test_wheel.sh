#!/usr/bin/env bash
# Install the built wheel into a fresh venv with one onnxruntime release and run tests against the installed
# package (PYTHONPATH unset, so the source tree's python/ortquant is never imported). Used by `make wheel-test`
# (whole suite, the pinned onnxruntime), `make ort-matrix` (conformance tests, each onnxruntime in
# tools/ort_matrix.txt) and `make onnx-matrix` (conformance tests, each onnx in tools/onnx_matrix.txt).
#
#   tools/test_wheel.sh PYTHON WHEELDIR ORT_VERSION full|conformance [ONNX_VERSION]
set -euo pipefail
py=${1:?usage}; wheels=${2:?usage}; ort=${3:?usage}; suite=${4:?usage}; onnx=${5:-1.23.2}
root=$(cd "$(dirname "$0")/.." && pwd)
tag=$("$py" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
whl=$(ls "$wheels"/ortquant-*-"$tag"-*manylinux*.whl)
venv=$root/build/wheel-test/ort-$ort-onnx-$onnx
rm -rf "$venv"
"$py" -m venv "$venv"
numpy="numpy>=1.26"
case $ort in 1.1[0-8].*) numpy="numpy<2" ;; esac   # onnxruntime < 1.19 was built against numpy 1.x
pkgs=("$whl" "onnxruntime==$ort" "onnx==$onnx" "$numpy" "pytest>=8")
if [ "$suite" = full ]; then
  pkgs+=("qonnx==1.0.0" "onnxruntime-extensions")
  tests=(tests)
else
  # The conformance tests: linger's exported cases with linger's outputs, the Brevitas models against qonnx's
  # stored outputs, and the QONNX/nGraph op tests that go through onnxruntime sessions (the _C-only kernel
  # tests do not depend on the onnxruntime version and run once, in the full suite).
  tests=(tests/linger/test_conformance.py tests/linger/test_matrix_conformance.py tests/models
         tests/qonnx/test_quant.py tests/qonnx/test_bipolar_quant.py tests/qonnx/test_float_quant.py
         tests/qonnx/test_trunc.py tests/ngraph/test_dequantize.py tests/test_onnx_versions.py)
fi
"$venv/bin/pip" install -q "${pkgs[@]}" 2> >(grep -v "^WARNING: Location" >&2)
cd "$root"
echo "== ortquant wheel $(basename "$whl") with onnxruntime $ort, onnx $onnx: ${tests[*]}"
# The C++ host test binary of a developer build (if any) then runs against the wheel's libortquant.so.
env -u PYTHONPATH -u ORTQUANT_LIBRARY ORTQUANT_TEST_INSTALLED=1 ORTQUANT_SKIP_WHEEL_TEST=1 ORTQUANT_WHEEL="$whl" \
  ORTQUANT_BUILD_DIR="${ORTQUANT_BUILD_DIR:-$root/build}" \
  "$venv/bin/python" -m pytest -q -p no:cacheprovider "${tests[@]}"
