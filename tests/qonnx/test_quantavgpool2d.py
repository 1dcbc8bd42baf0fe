"""QONNX QuantAvgPool2d: C++ (through onnxruntime and ortquant._C on every ISA) vs the numpy reference, and vs
qonnx 1.0.0 (onnxruntime AveragePool + numpy post-processing) for integer inputs, special values, and non-integer
inputs where onnxruntime's MLAS sums windows in row-major order (its generic kernel: stride > 2)."""

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
OP = "QuantAvgPool2d"

# (NCHW input shape, kernel, stride, ibits, obits)
CASES = [
    ((1, 3, 8, 8), 2, 2, 4, 4),
    ((2, 5, 9, 7), 3, 1, 8, 8),
    ((2, 4, 9, 9), 3, 3, 4, 8),
    ((1, 17, 7, 7), 7, 1, 8, 4),  # global
    ((3, 2, 10, 6), 4, 2, 2, 32),
    ((1, 33, 5, 5), 2, 3, 16, 3),
]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _ints(rng: np.random.Generator, shape: tuple[int, ...], ibits: int, signed: bool) -> np.ndarray:
    lo, hi = (-(2 ** (ibits - 1)), 2 ** (ibits - 1)) if signed else (0, 2**ibits)
    return rng.integers(lo, hi, shape).astype(np.float32)


def _floats(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = (rng.standard_normal(shape) * 7).astype(np.float32)
    x.reshape(-1)[::5] = np.round(x.reshape(-1)[::5]) + 0.5  # window sums near .5 ties
    return x


def _specials(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = _ints(rng, shape, 4, True)
    flat = x.reshape(-1)
    idx = rng.choice(flat.size, flat.size // 6, replace=False)
    flat[idx] = np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)[np.arange(idx.size) % 4]
    return x


def _layout(x: np.ndarray, layout: str) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)) if layout == "NHWC" else x


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kind", ["ints", "floats", "specials"])
def test_kernels_match_reference(isa, case, layout, kind, rng):
    shape, k, s, ibits, obits = case
    if kind == "ints":
        x = _ints(rng, shape, ibits, True)
    elif kind == "floats":
        x = _floats(rng, shape)
    else:
        x = _specials(rng, shape)
    x = _layout(x, layout)
    with np.errstate(invalid="ignore"):
        want = ref.quant_avgpool2d(x, k, s, ibits, obits, layout)
    assert_bitexact(kernels.quant_avgpool2d(x, k, s, ibits, obits, layout), want)


def test_shift_values():
    assert ref.quant_avgpool_shift(4, 4, 2) == 2  # 15 * 4 = 60 -> 6 bits
    assert ref.quant_avgpool_shift(8, 8, 3) == 4  # 255 * 9 = 2295 -> 12 bits
    assert ref.quant_avgpool_shift(4, 8, 2) == 0
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    # window sums 10, 18, 42, 50 >> 2
    got = kernels.quant_avgpool2d(x, 2, 2, 4, 4)
    assert_bitexact(got, np.array([[[[2, 4], [10, 12]]]], np.float32))
    # negative sums shift toward -inf (arithmetic shift)
    got = kernels.quant_avgpool2d(-x - 1, 2, 2, 4, 4)
    assert_bitexact(got, np.array([[[[-4, -6], [-12, -14]]]], np.float32))


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("case", CASES)
def test_ort_matches_reference(domain, layout, case, rng):
    shape, k, s, ibits, obits = case
    x = _layout(_floats(rng, shape), layout)
    attrs = {"kernel": k, "stride": s, "ibits": ibits, "obits": obits, "signed": 1, "data_layout": layout}
    (y,) = run_node(OP, domain, [x], attrs=attrs)
    assert_bitexact(y, ref.quant_avgpool2d(x, k, s, ibits, obits, layout))


def test_ort_threads_defaults_and_folding(rng):
    x = _ints(rng, (4, 64, 32, 32), 8, False)
    attrs = {"kernel": 2, "stride": 2, "ibits": 8, "obits": 8, "signed": 0}
    for threads in (1, 2):
        for layout in ("NCHW", "NHWC"):
            xl = _layout(x, layout)
            (y,) = run_node(OP, DOMAINS[0], [xl], attrs={**attrs, "data_layout": layout}, threads=threads)
            assert_bitexact(y, ref.quant_avgpool2d(xl, 2, 2, 8, 8, layout))
    small = x[:1, :3, :6, :6].copy()
    model, _ = make_node_model(
        OP, DOMAINS[0], [small], const=True, attrs={"kernel": 3, "stride": 3, "ibits": 8, "obits": 4}
    )
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.quant_avgpool2d(small, 3, 3, 8, 4))


# ---- vs qonnx 1.0.0 -------------------------------------------------------------------------------------


def _qonnx(x: np.ndarray, attrs: dict, out_shape: tuple[int, ...]) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return qonnx_execute(qonnx_node(OP, 1, **attrs), [x], out_shape=out_shape)


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("kind", ["unsigned", "signed", "specials"])
def test_against_qonnx(case, layout, kind, rng):
    shape, k, s, ibits, obits = case
    if kind == "specials":
        x = _specials(rng, shape)
    else:
        x = _ints(rng, shape, ibits, kind == "signed")
    x = _layout(x, layout)
    attrs = {"kernel": k, "stride": s, "ibits": ibits, "obits": obits, "signed": int(kind != "unsigned")}
    attrs["data_layout"] = layout
    (got,) = run_node(OP, DOMAINS[0], [x], attrs=attrs)
    want = _qonnx(x, attrs, got.shape)
    assert want.dtype == np.float32
    assert_bitexact(got, want)


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
@pytest.mark.parametrize("shape,k,s", [((2, 3, 10, 10), 3, 3), ((1, 4, 13, 11), 2, 3), ((1, 2, 9, 9), 4, 5)])
def test_against_qonnx_non_integer_row_major(shape, k, s, rng):
    """Non-integer inputs: equal to qonnx where MLAS sums each window in row-major order (stride > 2)."""
    x = _floats(rng, shape)
    attrs = {"kernel": k, "stride": s, "ibits": 6, "obits": 5, "signed": 1}
    (got,) = run_node(OP, DOMAINS[0], [x], attrs=attrs)
    assert_bitexact(got, _qonnx(x, attrs, got.shape))


# ---- bad input ------------------------------------------------------------------------------------------

GOOD = {"kernel": 2, "stride": 2, "ibits": 4, "obits": 4, "signed": 0}


@pytest.mark.parametrize(
    "change,name",
    [
        ({"kernel": 0}, "kernel"),
        ({"stride": 0}, "stride"),
        ({"ibits": 0}, "ibits"),
        ({"obits": 65}, "obits"),
        ({"signed": 2}, "signed"),
        ({"data_layout": "NWC"}, "data_layout"),
        ({"data_layout": "nchw"}, "data_layout"),
        ({"kernel": None}, "kernel"),
        ({"stride": None}, "stride"),
        ({"ibits": None}, "ibits"),
        ({"obits": None}, "obits"),
        ({"kernel": [2, 2]}, "kernel"),
        ({"stride": 1.0}, "stride"),
    ],
)
def test_bad_attributes_fail_at_session_creation(change, name):
    attrs = {k: v for k, v in {**GOOD, **change}.items() if v is not None}
    model, _ = make_node_model(OP, DOMAINS[0], [np.ones((1, 2, 4, 4), np.float32)], attrs=attrs)
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    assert "quantavgpool2d_node" in str(e.value) and f"'{name}'" in str(e.value)


def _error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


def test_runtime_shape_errors():
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((2, 4, 4), np.float32)], attrs=GOOD))
    assert "quantavgpool2d_node" in msg and "4-D" in msg
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((1, 2, 1, 4), np.float32)], attrs=GOOD))
    assert "quantavgpool2d_node" in msg and "larger than the padded input" in msg


def test_wrong_dtype_and_input_count():
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((1, 2, 4, 4))], attrs=GOOD))
    assert "quantavgpool2d_node" in msg and "double" in msg
    x = np.ones((1, 2, 4, 4), np.float32)
    msg = _error(make_node_model(OP, DOMAINS[0], [x, x], attrs=GOOD))
    assert "quantavgpool2d_node" in msg
