"""LinearInt through onnxruntime + ortquant vs the numpy reference (int64 sums), on every output kind, with
constant and runtime weights, any leading dims, both domains; bad inputs fail naming the node and the cause."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matrix_util import DOMAINS, int8_data, matrix_model, out_attrs, run_matrix

from conftest import ORT_ERRORS, assert_bitexact, run_model
from ortquant import kernels
from ortquant.reference import linger_matrix as ref

OUTS = [(8, 128.0), (4, 8.0), (16, 2.0**13), (32, 0.75), (None, None)]


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("o_bits,scale_o", OUTS)
@pytest.mark.parametrize("const", [True, False])
def test_linear_matches_reference(domain, o_bits, scale_o, const, rng):
    x = int8_data(rng, (2, 3, 37), extreme=0.1)
    w = int8_data(rng, (70, 37), extreme=0.1)
    b = rng.integers(-(2**15), 2**15, 70).astype(np.int32)
    attrs = out_attrs(o_bits, scale_o, scale_x=64.0, scale_w=256.0)
    got = run_matrix("LinearInt", [x, w, b], attrs, const=[False, const, const], domain=domain)
    assert_bitexact(got, ref.linear(x, w, b, 64.0, 256.0, scale_o, o_bits))


@pytest.mark.parametrize("shape", [(9,), (1, 9), (5, 9), (2, 3, 9), (2, 1, 2, 9), (0, 9)])
def test_linear_leading_dims_and_no_bias(shape, rng):
    x = int8_data(rng, shape)
    w = int8_data(rng, (5, 9))
    attrs = out_attrs(8, 16.0, scale_x=32.0, scale_w=128.0)
    got = run_matrix("LinearInt", [x, w], attrs, const=[False, True])
    assert_bitexact(got, ref.linear(x, w, None, 32.0, 128.0, 16.0, 8))


def test_linear_non_power_of_two_scales(rng):
    x = int8_data(rng, (17, 100))
    w = int8_data(rng, (33, 100))
    b = rng.integers(-5000, 5000, 33).astype(np.int32)
    for o_bits, scale_o in [(8, 0.37), (None, None)]:
        attrs = out_attrs(o_bits, scale_o, scale_x=3.0, scale_w=5.5)
        got = run_matrix("LinearInt", [x, w, b], attrs, const=[False, True, False])
        assert_bitexact(got, ref.linear(x, w, b, 3.0, 5.5, scale_o, o_bits))


def test_linear_large_threads(rng):
    x = int8_data(rng, (256, 512))
    w = int8_data(rng, (384, 512))
    b = rng.integers(-(2**16), 2**16, 384).astype(np.int32)
    attrs = out_attrs(8, 2.0, scale_x=64.0, scale_w=64.0)
    model, feeds = matrix_model("LinearInt", [x, w, b], attrs, const=[False, True, True])
    want = ref.linear(x, w, b, 64.0, 64.0, 2.0, 8)
    for threads in (1, 2):
        assert_bitexact(run_model(model, feeds, threads=threads)[0], want)


_ISA_SCRIPT = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from matrix_util import int8_data, matrix_model, out_attrs
from conftest import run_model
from ortquant.reference import linger_matrix as ref
rng = np.random.default_rng(7)
x = int8_data(rng, (13, 45)); w = int8_data(rng, (70, 45)); b = rng.integers(-999, 999, 70).astype(np.int32)
attrs = out_attrs(8, 16.0, scale_x=64.0, scale_w=128.0)
for const in (True, False):
    y = run_model(*matrix_model("LinearInt", [x, w, b], attrs, const=[False, const, True]))[0]
    assert np.array_equal(y, ref.linear(x, w, b, 64.0, 128.0, 16.0, 8)), "LinearInt differs"
xc = int8_data(rng, (1, 6, 9, 9)); wc = int8_data(rng, (10, 3, 3, 3)); bc = rng.integers(-999, 999, 10).astype(np.int32)
cattrs = dict(attrs, strides=[2, 2], pads=[1, 1, 1, 1], group=2)
y = run_model(*matrix_model("Conv2dInt", [xc, wc, bc], cattrs, const=[False, True, True]))[0]
want = ref.conv2d(xc, wc, bc, 64.0, 128.0, 16.0, 8, (2, 2), (1, 1, 1, 1), (1, 1), 2)
assert np.array_equal(y, want), "Conv2dInt differs"
print("ok")
"""


@pytest.mark.parametrize("isa", kernels.supported_isas())
def test_ort_path_on_every_isa(isa):
    # The library picks its kernel path once per process from ORTQUANT_ISA: each path this build runs (avxvnni and
    # avx512vnni select their GEMM kernels). The child imports the same ortquant package as this process.
    tests = Path(__file__).resolve().parent.parent
    env = dict(os.environ, ORTQUANT_ISA=isa)
    pkg = Path(kernels.__file__).resolve().parent.parent
    env["PYTHONPATH"] = os.pathsep.join([str(pkg), str(tests), env.get("PYTHONPATH", "")])
    r = subprocess.run(
        [sys.executable, "-c", _ISA_SCRIPT, str(Path(__file__).resolve().parent)],
        env=env,
        cwd=tests,  # `python -c` puts the working directory first: tests/conftest.py, not the repository root's
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


# ---- bad input -------------------------------------------------------------------------------------------


def _expect_error(inputs, attrs, const, *causes):
    with pytest.raises(ORT_ERRORS) as e:
        run_matrix("LinearInt", inputs, attrs, const=const)
    msg = str(e.value)
    assert "linearint_node" in msg, msg
    for c in causes:
        assert c in msg, msg


def test_weight_not_int8(rng):
    x = int8_data(rng, (2, 4))
    attrs = out_attrs(8, 1.0, scale_x=1.0, scale_w=1.0)
    for const in (True, False):
        _expect_error([x, np.zeros((3, 4), np.uint8)], attrs, [False, const], "weight must be int8", "uint8")
    _expect_error([x.astype(np.int16), np.zeros((3, 4), np.int8)], attrs, [False, True], "x must be int8")


def test_bias_dtype_and_shape(rng):
    x = int8_data(rng, (2, 4))
    w = np.zeros((3, 4), np.int8)
    attrs = out_attrs(8, 1.0, scale_x=1.0, scale_w=1.0)
    _expect_error([x, w, np.zeros(3, np.int64)], attrs, [False, True, True], "bias must be int32")
    _expect_error([x, w, np.zeros(4, np.int32)], attrs, [False, True, True], "bias must have shape [3]")
    _expect_error([x, w, np.zeros(4, np.int32)], attrs, [False, True, False], "bias must have shape [3]")


def test_mismatched_features(rng):
    attrs = out_attrs(8, 1.0, scale_x=1.0, scale_w=1.0)
    _expect_error([int8_data(rng, (2, 5)), np.zeros((3, 4), np.int8)], attrs, [False, True], "5 features", "K = 4")
    _expect_error([int8_data(rng, (2, 4)), np.zeros((3, 4, 1), np.int8)], attrs, [False, True], "weight must be 2-D")


def test_bad_attributes(rng):
    x = int8_data(rng, (2, 4))
    w = np.zeros((3, 4), np.int8)
    _expect_error([x, w], {"scale_w": 1.0}, [False, True], "scale_x")
    _expect_error([x, w], {"scale_x": 0.0, "scale_w": 1.0}, [False, True], "scale_x", "positive")
    _expect_error([x, w], {"scale_x": 1.0, "scale_w": 1.0, "o_bits": 8}, [False, True], "scale_o")
    _expect_error([x, w], out_attrs(40, 1.0, scale_x=1.0, scale_w=1.0), [False, True], "o_bits")
    bad_platform = dict(out_attrs(8, 1.0, scale_x=1.0, scale_w=1.0), platform_quant="castor")
    _expect_error([x, w], bad_platform, [False, True], "platform_quant")
