"""nGraph Dequantize (domain ``ngraph``): C++ through onnxruntime and through ortquant._C on every ISA vs the numpy
reference, hand-written expectations for the exact 64-bit difference and the float16 rounding, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import NP_TO_ONNX, assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import ngraph as ref

DOMAIN = "ngraph"
QTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32]
REALS = [np.float32, np.float16]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest


def _values(qtype, shape, rng: np.random.Generator) -> np.ndarray:
    """Integers of qtype with the extremes first, then random ones."""
    info = np.iinfo(qtype)
    n = int(np.prod(shape))
    base = np.array([info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.min + 1, info.max - 1], np.int64)
    vals = np.concatenate([base, rng.integers(info.min, int(info.max) + 1, max(n - base.size, 0), dtype=np.int64)])
    return vals[:n].astype(qtype).reshape(shape)


def _cases(qtype, real, rng: np.random.Generator):
    """(q, scale, zero_point, axes): per-tensor, one axis, two axes, negative axes; odd scales and signs."""
    q = _values(qtype, (3, 4, 5, 7), rng)
    scales = np.array([1.0, 0.5, -0.25, 0.1, 3.3e-5, 7.77, 1e-8, 0.0], np.float64)
    cases = []
    for s in scales:
        for z in _values(qtype, (3,), rng):
            cases.append((q, real(s), np.array(z, qtype), ()))
    cases.append((q, rng.uniform(-2, 2, (1,)).astype(real), _values(qtype, (1,), rng), ()))
    cases.append((q, rng.uniform(-2, 2, (4,)).astype(real), _values(qtype, (4,), rng), (1,)))
    cases.append((q, rng.uniform(-2, 2, (7,)).astype(real), _values(qtype, (7,), rng), (-1,)))
    cases.append((q, rng.uniform(-2, 2, (3, 5)).astype(real), _values(qtype, (3, 5), rng), (0, 2)))
    cases.append((q, rng.uniform(-2, 2, (3, 4, 5, 7)).astype(real), _values(qtype, (3, 4, 5, 7), rng), (3, 0, 1, 2)))
    return cases


@pytest.mark.parametrize("real", REALS)
@pytest.mark.parametrize("qtype", QTYPES)
def test_kernels_match_reference(qtype, real, rng):
    for q, s, z, axes in _cases(qtype, real, rng):
        want = ref.dequantize(q, s, z, axes)
        for isa in ISAS:
            kernels.set_isa(isa)
            try:
                assert_bitexact(kernels.ngraph_dequantize(q, s, z, axes), want)
            finally:
                kernels.set_isa("")


@pytest.mark.parametrize("real", REALS)
@pytest.mark.parametrize("qtype", QTYPES)
def test_ort_matches_reference(qtype, real, rng):
    for i, (q, s, z, axes) in enumerate(_cases(qtype, real, rng)):
        attrs = {"axes": list(axes)} if axes else None
        const = [False, i % 2 == 0, i % 2 == 0]
        (y,) = run_node(
            "Dequantize", DOMAIN, [q, s, z], const=const, attrs=attrs, output_dtypes=[NP_TO_ONNX[np.dtype(real)]]
        )
        assert_bitexact(y, ref.dequantize(q, s, z, axes))


@pytest.mark.parametrize("qtype", [np.int16, np.uint16])
def test_float16_all_16bit_values(qtype, rng):
    """Every 16-bit input with float16 scales: differences beyond float16's range become inf, products round once."""
    q = np.arange(65536, dtype=np.uint16).view(qtype).reshape(256, 256)
    for s, z in [(np.float16(1), 0), (np.float16(0.0999), 7), (np.float16(-3.0), -5 if qtype == np.int16 else 5)]:
        zp = np.array(z, qtype)
        want = ref.dequantize(q, s, zp)
        (y,) = run_node("Dequantize", DOMAIN, [q, s, zp], output_dtypes=[NP_TO_ONNX[np.dtype(np.float16)]])
        assert_bitexact(y, want)
        for isa in ISAS:
            kernels.set_isa(isa)
            try:
                assert_bitexact(kernels.ngraph_dequantize(q, s, zp), want)
            finally:
                kernels.set_isa("")


# Hand-written: (q, zero point, scale, expected) with the real type.
EXACT = [
    (np.int32, np.float32, 2147483647, -2147483648, 1.0, 4294967296.0),  # 2^32 - 1 rounds to 2^32 in float32
    (np.int32, np.float32, -2147483648, 2147483647, 1.0, -4294967296.0),  # nGraph's int32 subtraction overflows
    (np.int32, np.float32, -2147483648, 2147483647, 0.5, -2147483648.0),
    (np.int32, np.float32, 16777217, 0, 1.0, 16777216.0),  # one rounding to float32 (ties to even)
    (np.int32, np.float32, 16777219, 0, 1.0, 16777220.0),
    (np.int32, np.float32, 5, 5, -2.0, -0.0),  # zero times a negative scale keeps the sign
    (np.uint8, np.float32, 0, 255, 0.1, -25.5),  # float32(-255) * float32(0.1) rounds to -25.5
    (np.uint8, np.float32, 255, 0, 2.0, 510.0),
    (np.int8, np.float32, -128, 127, 1.0, -255.0),
    (np.uint16, np.float32, 65535, 0, 1.0, 65535.0),
    (np.int16, np.float32, -32768, 32767, -1.0, 65535.0),
    (np.uint16, np.float16, 65519, 0, 1.0, 65504.0),  # rounds down to float16 max
    (np.uint16, np.float16, 65520, 0, 1.0, np.inf),  # rounds up to inf
    (np.uint16, np.float16, 65520, 0, 0.5, np.inf),  # half(d) is already inf before the product
    (np.int16, np.float16, 32767, -32768, 1.0, np.inf),
    (np.int16, np.float16, 2049, 0, 1.0, 2048.0),  # 2049 is a tie in float16: to even
    (np.int16, np.float16, 2051, 0, 1.0, 2052.0),
    (np.int8, np.float16, 3, 0, 0.1, 0.2998046875),  # half(3 * half(0.1)) = half(0.29992675...)
    (np.int32, np.float16, 100000, 0, 0.001, np.inf),
    (np.int32, np.float16, -2147483648, 0, 1e-4, -np.inf),
]


def test_exact_values():
    for qtype, real, qv, zv, sv, want in EXACT:
        q = np.array([qv], qtype)
        z = np.array(zv, qtype)
        s = real(sv)
        w = np.array([want], real)
        assert_bitexact(ref.dequantize(q, s, z), w)
        (y,) = run_node("Dequantize", DOMAIN, [q, s, z], output_dtypes=[NP_TO_ONNX[np.dtype(real)]])
        assert_bitexact(y, w)
        for isa in ISAS:
            kernels.set_isa(isa)
            try:
                assert_bitexact(kernels.ngraph_dequantize(q, s, z), w)
            finally:
                kernels.set_isa("")


@pytest.mark.parametrize("real", REALS)
@pytest.mark.parametrize("qtype", QTYPES)
def test_every_overload_runs(qtype, real):
    """One OpSpec per (input dtype, scale dtype): each is chosen and gives the scale's dtype."""
    q = np.array([0, 1, 2, 100], qtype)
    (y,) = run_node(
        "Dequantize", DOMAIN, [q, real(0.5), np.array(2, qtype)], output_dtypes=[NP_TO_ONNX[np.dtype(real)]]
    )
    assert_bitexact(y, np.array([-1.0, -0.5, 0.0, 49.0], real))


@pytest.mark.parametrize(
    "real,names", [(np.float32, ["f32", "float32", "FLOAT", 1]), (np.float16, ["f16", "float16", "half", 10])]
)
def test_type_attribute_spellings(real, names):
    q = np.array([3, -1], np.int8)
    for name in names:
        (y,) = run_node(
            "Dequantize",
            DOMAIN,
            [q, real(0.25), np.int8(1)],
            attrs={"type": name},
            output_dtypes=[NP_TO_ONNX[np.dtype(real)]],
        )
        assert_bitexact(y, np.array([0.5, -0.5], real))


def test_per_axis_threads_and_folding(rng):
    q = rng.integers(-128, 128, (4, 64, 32, 32)).astype(np.int8)
    s = rng.uniform(0.001, 0.1, 64).astype(np.float32)
    z = rng.integers(-5, 5, 64).astype(np.int8)
    want = ref.dequantize(q, s, z, (1,))
    for threads in (1, 2):
        for const in (False, True):
            (y,) = run_node(
                "Dequantize",
                DOMAIN,
                [q, s, z],
                const=[const, const, const],
                threads=threads,
                attrs={"axes": [1]},
                output_dtypes=[NP_TO_ONNX[np.dtype(np.float32)]],
            )
            assert_bitexact(y, want)


# ---- bad input ----------------------------------------------------------------------------------------------------


def _error(inputs, attrs=None, real=np.float32) -> str:
    model, feeds = make_node_model(
        "Dequantize", DOMAIN, inputs, attrs=attrs, output_dtypes=[NP_TO_ONNX[np.dtype(real)]]
    )
    with pytest.raises(Exception) as e:
        run_model(model, feeds)
    msg = str(e.value)
    assert "dequantize_node" in msg, msg
    return msg


Q = np.zeros((2, 3, 4), np.int8)


@pytest.mark.parametrize("bad", ["f16", "half", "int8", "bf16", 10, 11, 3])
def test_type_disagreeing_with_scale(bad):
    msg = _error([Q, np.float32(1), np.int8(0)], {"type": bad})
    assert "'type'" in msg and str(bad) in msg


@pytest.mark.parametrize("axes,words", [([3], "out of range"), ([0, 0], "repeats"), ([-3, 0], "twice")])
def test_bad_axes(axes, words):
    msg = _error([Q, np.ones(2, np.float32), np.zeros(2, np.int8)], {"axes": axes})
    assert "axes" in msg and words in msg


@pytest.mark.parametrize(
    "s_shape,z_shape,axes",
    [((3,), (1,), [1]), ((4,), (4,), [1]), ((2,), (2,), None), ((2, 3), (3, 2), [0, 1]), ((1,), (1,), [0])],
)
def test_bad_parameter_shapes(s_shape, z_shape, axes):
    msg = _error([Q, np.ones(s_shape, np.float32), np.zeros(z_shape, np.int8)], {"axes": axes} if axes else None)
    assert "scale" in msg and "zero_point" in msg


@pytest.mark.parametrize(
    "inputs",
    [
        [Q, np.float32(1), np.uint8(0)],  # zero point dtype differs from the input's
        [Q, np.float64(1), np.int8(0)],  # float64 scale
        [Q.astype(np.int64), np.float32(1), np.int64(0)],  # int64 input
        [Q.astype(np.float32), np.float32(1), np.int8(0)],  # float input
    ],
)
def test_wrong_dtypes(inputs):
    _error(inputs)
