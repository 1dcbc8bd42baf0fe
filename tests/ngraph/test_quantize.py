"""nGraph Quantize (domain ``ngraph``): C++ through onnxruntime and through ortquant._C on every ISA vs the numpy
reference, hand-written expectations for the rounding-mode names and the exact int32 arithmetic, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ortquant
from conftest import NP_TO_ONNX, assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import ngraph as ref

DOMAIN = "ngraph"
MODES = list(ref.ROUND_MODES)
QTYPES = [np.int8, np.uint8, np.int16, np.uint16, np.int32]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest

# Quotients that probe rounding, saturation and the reference kernel's float quirks.
SPECIAL_Q = np.array(
    [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.3,
        -0.3,
        0.7,
        -0.7,
        0.49999997,
        -0.49999997,
        0.50000006,
        -0.50000006,
        1.4999999,
        -1.4999999,
        8388609.0,
        -8388609.0,
        8388607.5,
        -8388607.5,
        4194304.5,
        -4194304.5,
        126.5,
        127.5,
        -128.5,
        -127.5,
        254.5,
        255.5,
        32766.5,
        32767.5,
        -32768.5,
        65534.5,
        65535.5,
        2147483520.0,
        2147483648.0,
        -2147483648.0,
        -2147483904.0,
        3e9,
        -3e9,
        1e30,
        -1e30,
        np.inf,
        -np.inf,
        np.nan,
        1e-45,
        -1e-45,
        3.0,
        1.0000001,
    ],
    dtype=np.float32,
)


def _zero_points(qtype, n: int, rng: np.random.Generator) -> np.ndarray:
    """n zero points of qtype: the type's extremes, 0 and random values."""
    info = np.iinfo(qtype)
    base = np.array([info.min, info.max, 0, 1, info.max - 1], dtype=np.int64)
    extra = rng.integers(info.min, int(info.max) + 1, n, dtype=np.int64)
    return np.concatenate([base, extra])[:n].astype(qtype)


def _cases(qtype, rng: np.random.Generator, real=np.float32):
    """(x, scale, zero_point, axes) for per-tensor, one axis, two axes and negative axes, special and random data."""
    with np.errstate(over="ignore"):  # float16: the large specials become inf
        return _build_cases(qtype, rng, real)


def _build_cases(qtype, rng: np.random.Generator, real):
    n = SPECIAL_Q.size
    cases = []
    # Power-of-two scales: x = q * scale is exact, so x / scale hits the special quotients exactly.
    for s in (1.0, 0.5, 4.0):
        x = (SPECIAL_Q.astype(np.float64) * s).astype(real)
        for z in _zero_points(qtype, 3, rng):
            cases.append((x, real(s), np.array(z, qtype), ()))
    s1 = np.array([0.5, 1.0, 2.0, 0.25, 8.0], real)
    x1 = (SPECIAL_Q[None, :].astype(np.float64) * s1[:, None].astype(np.float64)).astype(real)
    z1 = _zero_points(qtype, 5, rng)
    cases.append((x1, s1, z1, (0,)))
    cases.append((np.ascontiguousarray(x1.T), s1, z1, (-1,)))
    s2 = np.array([[0.5, 1.0, 2.0], [4.0, 0.25, 1.0]], real)
    x2 = (SPECIAL_Q[None, :, None].astype(np.float64) * s2[:, None, :].astype(np.float64)).astype(real)
    z2 = _zero_points(qtype, 6, rng).reshape(2, 3)
    cases.append((x2, s2, z2, (0, 2)))
    cases.append((x2, s2, z2, (2, -3)))  # unsorted and negative: nGraph's AxisSet order is ascending
    # Random data, random (non power of two) scales.
    xr = (rng.standard_normal((3, 4, 5, n)) * 300).astype(real)
    cases.append((xr, rng.uniform(0.01, 3, ()).astype(real), _zero_points(qtype, 1, rng)[0], ()))
    cases.append((xr, rng.uniform(0.01, 3, (4,)).astype(real), _zero_points(qtype, 4, rng), (1,)))
    cases.append((xr, rng.uniform(0.01, 3, (3, n)).astype(real), _zero_points(qtype, 3 * n, rng).reshape(3, n), (0, 3)))
    cases.append((xr, rng.uniform(0.01, 3, (1,)).astype(real), _zero_points(qtype, 1, rng).reshape(1), ()))
    return cases


def _run(inputs, attrs=None, **kw):
    """Runs one Quantize node (round_mode ROUND_NEAREST_TOWARD_EVEN unless given); output dtype = zero point's."""
    attrs = {"round_mode": "ROUND_NEAREST_TOWARD_EVEN", **(attrs or {})}
    return run_node(
        "Quantize", DOMAIN, inputs, attrs=attrs, output_dtypes=[NP_TO_ONNX[np.asarray(inputs[2]).dtype]], **kw
    )


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_kernels_match_reference(mode, qtype, rng):
    for x, s, z, axes in _cases(qtype, rng):
        want = ref.quantize(x, s, z, axes, mode)
        for isa in ISAS:
            kernels.set_isa(isa)
            try:
                assert_bitexact(kernels.ngraph_quantize(x, s, z, axes, mode), want)
            finally:
                kernels.set_isa("")


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("mode", MODES)
def test_ort_matches_reference(mode, qtype, rng):
    for i, (x, s, z, axes) in enumerate(_cases(qtype, rng)):
        attrs = {"round_mode": mode.lower() if i % 2 else mode}  # names are case-insensitive
        if axes:
            attrs["axes"] = list(axes)
        # Alternate initializer parameters (captured at creation) and runtime parameters.
        const = [False, i % 2 == 0, i % 2 == 0]
        (y,) = run_node(
            "Quantize", DOMAIN, [x, s, z], const=const, attrs=attrs, output_dtypes=[NP_TO_ONNX[np.dtype(qtype)]]
        )
        assert_bitexact(y, ref.quantize(x, s, z, axes, mode))


@pytest.mark.parametrize("qtype", QTYPES)
def test_float16_all_values(qtype, rng):
    """float16 input: every float16 value, divided in float16 precision (scale 1, 3 and a per-axis scale)."""
    x = np.arange(65536, dtype=np.uint16).view(np.float16).reshape(256, 256)
    z = _zero_points(qtype, 256, rng)
    params = [
        (np.float16(1), z[2], ()),
        (np.float16(3), z[0], ()),
        (np.float16(0.0999), z[1], ()),
        (rng.uniform(0.01, 5, 256).astype(np.float16), z, (1,)),
    ]
    for mode in ("ROUND_NEAREST_TOWARD_EVEN", "ROUND_NEAREST_TOWARD_INFINITY", "ROUND_NEAREST_DOWNWARD", "ROUND_DOWN"):
        for s, zp, axes in params:
            zp = np.asarray(zp, qtype)
            want = ref.quantize(x, s, zp, axes, mode)
            for isa in ISAS:
                kernels.set_isa(isa)
                try:
                    assert_bitexact(kernels.ngraph_quantize(x, s, zp, axes, mode), want)
                finally:
                    kernels.set_isa("")
            attrs = {"round_mode": mode, "axes": list(axes)} if axes else {"round_mode": mode}
            (y,) = run_node("Quantize", DOMAIN, [x, s, zp], attrs=attrs, output_dtypes=[NP_TO_ONNX[np.dtype(qtype)]])
            assert_bitexact(y, want)


@pytest.mark.parametrize("qtype", QTYPES)
def test_float16_special_quotients(qtype, rng):
    for mode in MODES:
        for x, s, z, axes in _cases(qtype, rng, real=np.float16)[:8]:
            want = ref.quantize(x, s, z, axes, mode)
            for isa in ISAS:
                kernels.set_isa(isa)
                try:
                    assert_bitexact(kernels.ngraph_quantize(x, s, z, axes, mode), want)
                finally:
                    kernels.set_isa("")


# Hand-written from the spec table (ort-custom-ops.md 4.1/4.5), not computed by any code.
TABLE_X = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -0.7, -0.3, 0.3, 0.7, 0.49999997, -0.49999997]
TABLE = {
    "ROUND_NEAREST_TOWARD_INFINITY": [-3, -2, -1, 1, 2, 3, -1, 0, 0, 1, 0, 0],
    "ROUND_NEAREST_TOWARD_ZERO": [-2, -1, 0, 0, 1, 2, -1, 0, 0, 1, 0, 0],
    "ROUND_NEAREST_UPWARD": [-2, -1, 0, 1, 2, 3, -1, 0, 0, 1, 0, 0],
    "ROUND_NEAREST_DOWNWARD": [-3, -2, -1, 0, 1, 2, -1, 0, 0, 1, 0, 0],
    "ROUND_NEAREST_TOWARD_EVEN": [-2, -2, 0, 0, 2, 2, -1, 0, 0, 1, 0, 0],
    "ROUND_TOWARD_INFINITY": [-3, -2, -1, 1, 2, 3, -1, -1, 1, 1, 1, -1],
    "ROUND_TOWARD_ZERO": [-2, -1, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0],
    "ROUND_UP": [-2, -1, 0, 1, 2, 3, 0, 0, 1, 1, 1, 0],
    "ROUND_DOWN": [-3, -2, -1, 0, 1, 2, -1, -1, 0, 0, 0, -1],
}


@pytest.mark.parametrize("mode", MODES)
def test_mode_names_table(mode):
    x = np.array(TABLE_X, np.float32)
    want = np.array(TABLE[mode], np.int8)
    assert_bitexact(ref.quantize(x, np.float32(1), np.int8(0), (), mode), want)
    (y,) = run_node(
        "Quantize",
        DOMAIN,
        [x, np.float32(1), np.int8(0)],
        attrs={"round_mode": mode},
        output_dtypes=[NP_TO_ONNX[np.dtype(np.int8)]],
    )
    assert_bitexact(y, want)
    for isa in ISAS:
        kernels.set_isa(isa)
        try:
            assert_bitexact(kernels.ngraph_quantize(x, np.float32(1), np.int8(0), (), mode), want)
        finally:
            kernels.set_isa("")


# (quotient, zero point, expected int32): exact where nGraph's float arithmetic is not (hand-written).
INT32_EXACT = [
    (8388609.0, 0, 8388609),  # floor(x + 0.5) in float32 gives 8388610
    (-8388609.0, 0, -8388609),
    (2147483520.0, 127, 2147483647),  # lands exactly on INT32_MAX
    (2147483520.0, 128, 2147483647),  # one past: saturates
    (2147483520.0, -1, 2147483519),  # float32 cannot hold the sum; the result is exact
    (2147483648.0, 0, 2147483647),  # 2^31: saturates (nGraph's cast is UB here)
    (2147483648.0, -1, 2147483647),
    (2147483648.0, -2, 2147483646),
    (-2147483648.0, 2147483647, -1),  # nGraph adds in float and gets 0
    (-2147483648.0, 0, -2147483648),
    (-2147483648.0, -1, -2147483648),
    (-2147483904.0, 255, -2147483648),
    (-2147483904.0, 256, -2147483648),
    (-2147483904.0, 257, -2147483647),
    (1.0, 2147483647, 2147483647),
    (-1.0, -2147483648, -2147483648),
    (-1.0, 2147483647, 2147483646),
    (16777215.0, 16777217, 33554432),  # zero point above 2^24: float32 would round it
    (3e9, -2147483648, 852516352),
    (1e30, -2147483648, 2147483647),
    (np.inf, -2147483648, 2147483647),
    (-np.inf, 2147483647, -2147483648),
    (np.nan, 12345, 12345),  # NaN quotient: the zero point
    (np.nan, -2147483648, -2147483648),
]


def test_int32_exact_and_saturating():
    x = np.array([c[0] for c in INT32_EXACT], np.float32)
    z = np.array([c[1] for c in INT32_EXACT], np.int32)
    want = np.array([c[2] for c in INT32_EXACT], np.int32)
    s = np.ones(len(INT32_EXACT), np.float32)
    for mode in MODES:
        assert_bitexact(ref.quantize(x, s, z, (0,), mode), want)
        (y,) = run_node(
            "Quantize",
            DOMAIN,
            [x, s, z],
            attrs={"round_mode": mode, "axes": [0]},
            output_dtypes=[NP_TO_ONNX[np.dtype(np.int32)]],
        )
        assert_bitexact(y, want)
        for isa in ISAS:
            kernels.set_isa(isa)
            try:
                assert_bitexact(kernels.ngraph_quantize(x, s, z, (0,), mode), want)
            finally:
                kernels.set_isa("")


# (quotient, zero point, expected) per narrow type, hand-written: zero points at the extremes, NaN, inf.
NARROW_EXACT = {
    np.int8: [
        (127.5, 0, 127),
        (-128.5, 0, -128),
        (1.0, 127, 127),
        (-1.0, -128, -128),
        (-255.0, 127, -128),
        (-255.0, 127 - 0, -128),
        (-128.0, 127, -1),
        (255.0, -128, 127),
        (np.nan, -128, -128),
        (np.inf, -128, 127),
        (-np.inf, 127, -128),
        (1e30, 0, 127),
    ],
    np.uint8: [
        (255.0, 0, 255),
        (256.0, 0, 255),
        (-1.0, 0, 0),
        (-255.0, 255, 0),
        (-200.0, 255, 55),
        (np.nan, 200, 200),
        (-np.inf, 255, 0),
    ],
    np.int16: [
        (32767.0, 0, 32767),
        (32768.0, 0, 32767),
        (-65535.0, 32767, -32768),
        (-65535.0, 32767, -32768),
        (65535.0, -32768, 32767),
        (-32768.0, 32767, -1),
        (np.nan, -32768, -32768),
    ],
    np.uint16: [
        (65535.0, 0, 65535),
        (65536.0, 0, 65535),
        (-65535.0, 65535, 0),
        (-1.0, 65535, 65534),
        (16777215.0, 0, 65535),
        (np.nan, 65535, 65535),
    ],
}


@pytest.mark.parametrize("qtype", list(NARROW_EXACT))
def test_narrow_extremes(qtype):
    rows = NARROW_EXACT[qtype]
    x = np.array([r[0] for r in rows], np.float32)
    z = np.array([r[1] for r in rows], qtype)
    want = np.array([r[2] for r in rows], qtype)
    s = np.ones(len(rows), np.float32)
    for mode in MODES:
        assert_bitexact(ref.quantize(x, s, z, (0,), mode), want)
        (y,) = run_node(
            "Quantize",
            DOMAIN,
            [x, s, z],
            attrs={"round_mode": mode, "axes": [0]},
            output_dtypes=[NP_TO_ONNX[np.dtype(qtype)]],
        )
        assert_bitexact(y, want)
        for isa in ISAS:
            kernels.set_isa(isa)
            try:
                assert_bitexact(kernels.ngraph_quantize(x, s, z, (0,), mode), want)
            finally:
                kernels.set_isa("")


def test_zero_and_negative_scale():
    x = np.array([-3.0, -0.0, 0.0, 2.5, 7.0, np.nan], np.float32)
    (y,) = _run([x, np.float32(0), np.int8(5)])
    assert_bitexact(y, np.array([-128, 5, 5, 127, 127, 5], np.int8))  # x/0: +-inf or NaN
    (y,) = _run([x, np.float32(-0.5), np.int8(0)])
    assert_bitexact(y, np.array([6, 0, 0, -5, -14, 0], np.int8))  # ties to even: -5.0 stays, 0 +-0


@pytest.mark.parametrize("real", [np.float32, np.float16])
@pytest.mark.parametrize("qtype", QTYPES)
def test_every_overload_runs(real, qtype):
    """One OpSpec per (input dtype, zero-point dtype): each is chosen and gives its own output dtype."""
    x = np.array([-3.5, -1.0, 0.0, 2.5, 1000.0], real)
    z = np.array(1 if qtype in (np.uint8, np.uint16) else -1, qtype)
    (y,) = run_node(
        "Quantize",
        DOMAIN,
        [x, real(0.5), z],
        attrs={"round_mode": "ROUND_NEAREST_UPWARD"},
        output_dtypes=[NP_TO_ONNX[np.dtype(qtype)]],
    )
    info = np.iinfo(qtype)
    expect = [-7 + int(z), -2 + int(z), 0 + int(z), 5 + int(z), 2000 + int(z)]  # quotients -7, -2, 0, 5, 2000
    assert_bitexact(y, np.clip(np.array(expect), info.min, info.max).astype(qtype))


def test_ties_to_even_with_zero_point():
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5], np.float32)
    (y,) = _run([x, np.float32(1), np.uint8(10)])
    assert_bitexact(y, np.array([10, 12, 12, 10, 8], np.uint8))


@pytest.mark.parametrize(
    "qtype,names",
    [
        (np.int8, ["i8", "int8", "INT8", "int8_t", 3]),
        (np.uint8, ["u8", "uint8", "uint8_t", 2]),
        (np.int16, ["i16", "int16", 5]),
        (np.uint16, ["u16", "UINT16", 4]),
        (np.int32, ["i32", "int32", "int32_t", 6]),
    ],
)
def test_type_attribute_spellings(qtype, names):
    x = np.array([1.5, -2.5], np.float32)
    for name in names:
        (y,) = _run([x, np.float32(1), np.array(3, qtype)], {"type": name})
        assert_bitexact(y, np.array([5, 1], qtype))


def test_per_axis_threads_and_runtime_params(rng):
    x = (rng.standard_normal((4, 64, 32, 32)) * 50).astype(np.float32)
    s = rng.uniform(0.05, 2, 64).astype(np.float32)
    z = rng.integers(-20, 20, 64).astype(np.int8)
    want = ref.quantize(x, s, z, (1,), "ROUND_NEAREST_TOWARD_INFINITY")
    for threads in (1, 2):
        for const in (False, True):
            (y,) = run_node(
                "Quantize",
                DOMAIN,
                [x, s, z],
                const=[False, const, const],
                threads=threads,
                attrs={"axes": [1], "round_mode": "ROUND_NEAREST_TOWARD_INFINITY"},
                output_dtypes=[NP_TO_ONNX[np.dtype(np.int8)]],
            )
            assert_bitexact(y, want)


def test_all_constant_node_is_folded_and_exact(rng):
    w = (rng.standard_normal((8, 3, 3, 3)) * 0.1).astype(np.float32)
    s = rng.uniform(0.001, 0.01, 8).astype(np.float32)
    z = np.zeros(8, np.int8)
    model, _ = make_node_model(
        "Quantize",
        DOMAIN,
        [w, s, z],
        const=True,
        attrs={"axes": [0], "round_mode": "ROUND_TOWARD_ZERO"},
        output_dtypes=[NP_TO_ONNX[np.dtype(np.int8)]],
    )
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.quantize(w, s, z, (0,), "ROUND_TOWARD_ZERO"))


def test_empty_and_scalar_input():
    (y,) = _run([np.zeros((0, 3), np.float32), np.float32(1), np.int8(0)])
    assert y.shape == (0, 3) and y.dtype == np.int8
    (y,) = _run([np.array(2.5, np.float32), np.float32(1), np.uint8(1)])
    assert_bitexact(y, np.array(3, np.uint8))


# Runs in a fresh process: the ISA choice of libortquant.so is read once from ORTQUANT_ISA.
_ISA_SCRIPT = """
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from conftest import NP_TO_ONNX, assert_bitexact, run_node
from ortquant.reference import ngraph as ref
x = np.array(sys.argv[2].split(","), np.float32)
for qtype in (np.int8, np.uint8, np.int16, np.uint16, np.int32):
    info = np.iinfo(qtype)
    for zp in (info.min, 0, info.max):
        z = np.array(zp, qtype)
        for mode in ref.ROUND_MODES:
            for real in (np.float32, np.float16):
                xr = x.astype(real)
                (y,) = run_node("Quantize", "ngraph", [xr, real(1), z], attrs={"round_mode": mode},
                                output_dtypes=[NP_TO_ONNX[np.dtype(qtype)]])
                assert_bitexact(y, ref.quantize(xr, real(1), z, (), mode))
                (d,) = run_node("Dequantize", "ngraph", [y, real(0.75), z], output_dtypes=[NP_TO_ONNX[np.dtype(real)]])
                assert_bitexact(d, ref.dequantize(y, real(0.75), z))
print("ok")
"""


@pytest.mark.parametrize("isa", ISAS)
def test_ort_on_each_isa(isa):
    """Quantize and Dequantize through onnxruntime with the library forced to each kernel path."""
    env = dict(os.environ, ORTQUANT_ISA=isa)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(kernels.__file__).parent.parent), env.get("PYTHONPATH", "")])
    with np.errstate(over="ignore"):
        xs = ",".join(repr(float(v)) for v in np.tile(SPECIAL_Q, 3))  # > one vector on every path
    r = subprocess.run(
        [sys.executable, "-c", _ISA_SCRIPT, str(Path(__file__).parent.parent), xs],
        env=env,
        capture_output=True,
        check=False,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]


# ---- bad input ----------------------------------------------------------------------------------------------------


def _error(inputs, attrs=None, qtype=np.int8, const=False) -> str:
    attrs = {"round_mode": "ROUND_NEAREST_TOWARD_EVEN", **(attrs or {})}
    attrs = {k: v for k, v in attrs.items() if v is not None}  # None: leave the attribute out
    model, feeds = make_node_model(
        "Quantize", DOMAIN, inputs, attrs=attrs, const=const, output_dtypes=[NP_TO_ONNX[np.dtype(qtype)]]
    )
    with pytest.raises(Exception) as e:
        run_model(model, feeds)
    msg = str(e.value)
    assert "quantize_node" in msg, msg
    return msg


X = np.ones((2, 3, 4), np.float32)


def test_missing_round_mode_fails_at_session_creation():
    msg = _error([X, np.float32(1), np.int8(0)], {"round_mode": None})
    assert "round_mode" in msg and "missing" in msg


def test_unknown_round_mode_fails_at_session_creation():
    msg = _error([X, np.float32(1), np.int8(0)], {"round_mode": "ROUND_SIDEWAYS"}, const=True)
    assert "round_mode" in msg and "ROUND_SIDEWAYS" in msg
    msg = _error([X, np.float32(1), np.int8(0)], {"round_mode": "HALF_EVEN"})  # a QONNX name is not an nGraph name
    assert "round_mode" in msg and "HALF_EVEN" in msg


@pytest.mark.parametrize("bad", ["u8", "int32", "float32", "i4", 2, 1, 7])
def test_type_disagreeing_with_zero_point(bad):
    msg = _error([X, np.float32(1), np.int8(0)], {"type": bad})
    assert "'type'" in msg and str(bad) in msg


def test_type_attribute_of_wrong_kind():
    msg = _error([X, np.float32(1), np.int8(0)], {"type": 3.0})
    assert "'type'" in msg


@pytest.mark.parametrize(
    "axes,words",
    [([3], "out of range"), ([-4], "out of range"), ([1, 1], "repeats"), ([2, -1], "twice")],
)
def test_bad_axes(axes, words):
    dims = [X.shape[a] for a in sorted({a % 3 for a in axes if -3 <= a < 3})] or [1]
    s = np.ones(dims if len(set(axes)) == len(axes) else [3], np.float32)
    msg = _error([X, s, np.zeros(s.shape, np.int8)], {"axes": axes})
    assert "axes" in msg and words in msg


@pytest.mark.parametrize(
    "s_shape,z_shape,axes",
    [
        ((3,), (4,), [1]),  # zero_point shape differs from scale shape
        ((3,), (3,), [2]),  # not the input dim at the axis
        ((1, 3), (1, 3), [1]),  # rank must equal |axes|
        ((2,), (2,), []),  # per-tensor needs one element
        ((), (2,), []),
        ((2, 4), (2, 4), [0, 1]),
    ],
)
def test_bad_parameter_shapes(s_shape, z_shape, axes):
    msg = _error([X, np.ones(s_shape, np.float32), np.zeros(z_shape, np.int8)], {"axes": axes} if axes else None)
    assert "scale" in msg and "zero_point" in msg


@pytest.mark.parametrize(
    "inputs",
    [
        [X.astype(np.float64), np.float64(1), np.int8(0)],  # float64 input
        [X, np.float16(1), np.int8(0)],  # scale dtype differs from input
        [X, np.float32(1), np.int64(0)],  # int64 zero point
        [X, np.float32(1), np.float32(0)],  # float zero point
        [X.astype(np.int8), np.float32(1), np.int8(0)],  # integer input
    ],
)
def test_wrong_dtypes(inputs):
    _error(inputs)
