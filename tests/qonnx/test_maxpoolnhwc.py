"""QONNX MaxPoolNHWC: C++ (through onnxruntime and ortquant._C on every ISA) vs the numpy reference, and vs qonnx
1.0.0 (which runs onnxruntime's MaxPool on the transposed tensor) for inputs without NaN, -inf-only windows or
ties between -0 and +0, where onnxruntime's result depends on which MLAS kernel it picks."""

from __future__ import annotations

import numpy as np
import pytest
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import qonnx_structural as ref

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest
OP = "MaxPoolNHWC"

# (input NHWC, kernel_shape, pads [t, l, b, r], strides, ceil_mode)
CASES = [
    ((1, 8, 8, 3), (2, 2), (0, 0, 0, 0), (2, 2), 0),
    ((2, 7, 9, 16), (3, 3), (1, 1, 1, 1), (2, 2), 0),
    ((2, 7, 9, 17), (3, 3), (1, 1, 1, 1), (2, 2), 1),
    ((1, 5, 5, 4), (2, 2), (0, 0, 0, 0), (2, 2), 1),  # ceil adds a partial window
    ((1, 3, 3, 5), (2, 2), (1, 1, 1, 1), (2, 2), 1),  # ceil's last window would start in the end padding: dropped
    ((3, 6, 10, 33), (3, 2), (1, 0, 2, 1), (1, 3), 0),  # asymmetric everything
    ((1, 6, 6, 1), (6, 6), (0, 0, 0, 0), (1, 1), 0),  # global
    ((1, 1, 12, 8), (1, 3), (0, 1, 0, 1), (1, 2), 1),  # 1-D as 2-D
    ((2, 4, 4, 64), (1, 1), (0, 0, 0, 0), (2, 2), 0),
]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _x(rng: np.random.Generator, shape: tuple[int, ...], special: bool) -> np.ndarray:
    """Distinct finite values; with special=True also NaN, +-inf, -0/+0 ties and -inf-only windows."""
    x = rng.permutation(np.arange(np.prod(shape), dtype=np.float32) * 0.25 - 50).reshape(shape).astype(np.float32)
    if special:
        flat = x.reshape(-1)
        idx = rng.choice(flat.size, min(flat.size, 40), replace=False)
        vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32)
        flat[idx] = vals[np.arange(idx.size) % vals.size]
        x[:, :2, :2, :] = -np.inf  # corner windows (with padding) that hold only -inf
        x[:, -1, :, : shape[3] // 2] = -0.0
        x[:, -1, ::2, : shape[3] // 2] = 0.0  # ties of -0 and +0 in both orders
    return x


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("special", [False, True])
def test_kernels_match_reference(isa, case, special, rng):
    shape, kernel, pads, strides, ceil = case
    x = _x(rng, shape, special)
    got = kernels.maxpool_nhwc(x, kernel, pads, strides, bool(ceil))
    assert_bitexact(got, ref.maxpool_nhwc(x, kernel, pads, strides, bool(ceil)))


def test_nan_and_zero_rules(isa):
    """NaN anywhere in a window gives NaN; of -0 and +0 the first wins; padding never wins over -inf."""
    x = np.array([np.nan, 1, 2, np.nan, -0.0, 0.0, 0.0, -0.0, -np.inf, -np.inf, 3, np.nan], np.float32)
    got = kernels.maxpool_nhwc(x.reshape(1, 1, 12, 1), (1, 2), (0, 0, 0, 0), (1, 2), False).reshape(-1)
    want = np.array([np.nan, np.nan, -0.0, 0.0, -np.inf, np.nan], np.float32)
    assert_bitexact(got, want)
    x = np.full((1, 1, 1, 3), -np.inf, np.float32)
    got = kernels.maxpool_nhwc(x, (1, 3), (0, 2, 0, 2), (1, 1), False)
    assert_bitexact(got, np.full((1, 1, 3, 3), -np.inf, np.float32))


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("case", CASES)
def test_ort_matches_reference(domain, case, rng):
    shape, kernel, pads, strides, ceil = case
    x = _x(rng, shape, True)
    attrs = {"kernel_shape": list(kernel), "pads": list(pads), "strides": list(strides), "ceil_mode": ceil}
    (y,) = run_node(OP, domain, [x], attrs=attrs)
    assert_bitexact(y, ref.maxpool_nhwc(x, kernel, pads, strides, bool(ceil)))


def test_ort_threads_and_constant_folding(rng):
    x = _x(rng, (4, 32, 32, 64), True)
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2]}
    want = ref.maxpool_nhwc(x, (3, 3), (1, 1, 1, 1), (2, 2))
    for threads in (1, 2):
        (y,) = run_node(OP, DOMAINS[0], [x], attrs=attrs, threads=threads)
        assert_bitexact(y, want)
    small = x[:1, :8, :8, :5].copy()
    model, _ = make_node_model(OP, DOMAINS[0], [small], const=True, attrs=attrs)
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.maxpool_nhwc(small, (3, 3), (1, 1, 1, 1), (2, 2)))


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
@pytest.mark.parametrize("case", CASES)
def test_against_qonnx(case, rng):
    shape, kernel, pads, strides, ceil = case
    x = _x(rng, shape, False)
    x[0, 0, 0, 0] = np.inf
    attrs = {"kernel_shape": list(kernel), "pads": list(pads), "strides": list(strides), "ceil_mode": ceil}
    (got,) = run_node(OP, DOMAINS[0], [x], attrs=attrs)
    want = qonnx_execute(qonnx_node(OP, 1, **attrs), [x], out_shape=got.shape)
    assert_bitexact(got, want.astype(np.float32))


# ---- bad input ------------------------------------------------------------------------------------------

GOOD = {"kernel_shape": [2, 2], "pads": [0, 0, 0, 0], "strides": [2, 2]}


@pytest.mark.parametrize(
    "change,name",
    [
        ({"kernel_shape": [2]}, "kernel_shape"),
        ({"kernel_shape": [2, 0]}, "kernel_shape"),
        ({"kernel_shape": [2, 2, 2]}, "kernel_shape"),
        ({"pads": [0, 0]}, "pads"),
        ({"pads": [0, -1, 0, 0]}, "pads"),
        ({"pads": [2, 0, 0, 0]}, "pads"),  # pad not smaller than the kernel
        ({"strides": [2]}, "strides"),
        ({"strides": [0, 1]}, "strides"),
        ({"ceil_mode": 2}, "ceil_mode"),
        ({"dilations": [2, 2]}, "dilations"),
        ({"auto_pad": "SAME_UPPER"}, "auto_pad"),
        ({"kernel_shape": None}, "kernel_shape"),
        ({"pads": None}, "pads"),
        ({"strides": None}, "strides"),
        ({"strides": 2}, "strides"),
    ],
)
def test_bad_attributes_fail_at_session_creation(change, name):
    attrs = {**GOOD, **change}
    attrs = {k: v for k, v in attrs.items() if v is not None}
    model, _ = make_node_model(OP, DOMAINS[0], [np.ones((1, 4, 4, 2), np.float32)], attrs=attrs)
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    assert "maxpoolnhwc_node" in str(e.value) and f"'{name}'" in str(e.value)


def _error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


def test_runtime_shape_errors():
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((4, 4, 2), np.float32)], attrs=GOOD))
    assert "maxpoolnhwc_node" in msg and "4-D" in msg
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((1, 1, 4, 2), np.float32)], attrs=GOOD))
    assert "maxpoolnhwc_node" in msg and "larger than the padded input" in msg


def test_wrong_dtype_and_input_count():
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((1, 4, 4, 2))], attrs=GOOD))
    assert "maxpoolnhwc_node" in msg and "double" in msg
    x = np.ones((1, 4, 4, 2), np.float32)
    msg = _error(make_node_model(OP, DOMAINS[0], [x, x], attrs=GOOD))
    assert "maxpoolnhwc_node" in msg
