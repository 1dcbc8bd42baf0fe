"""Quant with integer scale and zero-point inputs, as qonnx's QKeras/hls4ml converter writes them (int64 zero points
and bit widths, sometimes an int64 scale), compared bit for bit with qonnx 1.0.0's own ``execute_node``.

qonnx computes ``x / scale + zeropt`` with numpy arrays (NEP 50: 0-d arrays are not "weak"): int8/uint8/int16/uint16
keep a float32 computation float32, int32/uint32/int64/uint64 make it float64 (docs/ops.md, "float64 and int64
parameters"). Each case runs as an initializer (read once at session creation) and as a runtime input.
"""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pytest
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

from conftest import ORT_ERRORS, SPECIAL_F32, assert_bitexact, make_node_model, run_model

needs_qonnx = pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")

DOMAIN = "qonnx.custom_op.general"
INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
MODES = ["ROUND", "FLOOR", "HALF_UP"]


def _x(rng: np.random.Generator, dtype: type) -> np.ndarray:
    x = (rng.standard_normal((2, 3, 4, 5)) * 40).astype(dtype)
    flat = x.reshape(-1)
    flat[: SPECIAL_F32.size] = SPECIAL_F32.astype(dtype)
    flat[-4:] = np.array([0.25, 0.35, -0.45, 12.75], dtype)
    return x


@needs_qonnx
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("x_dtype", "s_dtype", "z_dtype"),
    [
        *[(np.float32, np.float32, z) for z in INTS],
        *[(np.float32, np.float64, z) for z in INTS],
        *[(np.float64, np.float32, z) for z in (np.int8, np.int64)],
        *[(np.float32, s, np.float32) for s in INTS],
        *[(np.float32, s, z) for s, z in itertools.product((np.int64, np.int8), (np.int64, np.int16))],
    ],
)
@pytest.mark.parametrize("bw_dtype", [np.float32, np.int64])
def test_quant_integer_scale_and_zeropt_match_qonnx(mode, x_dtype, s_dtype, z_dtype, bw_dtype):
    rng = np.random.default_rng(zlib.crc32(repr((mode, x_dtype, s_dtype, z_dtype, bw_dtype)).encode()))
    x = _x(rng, x_dtype)
    if np.issubdtype(s_dtype, np.integer):
        scale = np.array([1, 2, 4], s_dtype).reshape(1, 3, 1, 1)
    else:
        scale = np.array([0.1, 0.3, 0.07], s_dtype).reshape(1, 3, 1, 1)
    if np.issubdtype(z_dtype, np.integer):
        z = [0, 1, 3] if not np.issubdtype(z_dtype, np.signedinteger) else [0, 1, -2]
        zeropt = np.array(z, z_dtype).reshape(1, 3, 1, 1)
    else:
        zeropt = np.array([0.0, 1.0, -2.0], z_dtype).reshape(1, 3, 1, 1)
    for signed, narrow, bits in [(1, 0, 4), (1, 1, 8), (0, 0, 3), (1, 0, 1)]:
        bw = np.array(bits, bw_dtype)
        attrs = {"signed": signed, "narrow": narrow, "rounding_mode": mode}
        want = qonnx_execute(qonnx_node("Quant", 4, **attrs), [x, scale, zeropt, bw])
        for const in (False, True):
            model, feeds = make_node_model(
                "Quant", DOMAIN, [x, scale, zeropt, bw], const=[False, const, const, const], attrs=attrs
            )
            assert_bitexact(run_model(model, feeds)[0], want.astype(np.float32))


def test_integer_zeropt_with_float16_data_is_a_clear_error():
    x = np.ones((2, 3), np.float16)
    model, feeds = make_node_model(
        "Quant",
        DOMAIN,
        [x, np.array(0.5, np.float16), np.array(1, np.int64), np.array(4.0, np.float32)],
        const=[False, True, True, True],
    )
    with pytest.raises(ORT_ERRORS, match=r"Quant node 'quant_node': an integer scale or zeropt with float16"):
        run_model(model, feeds)


def test_bool_zeropt_is_refused_naming_the_input():
    model, feeds = make_node_model(
        "Quant",
        DOMAIN,
        [np.ones((2, 3), np.float32), np.array(0.5, np.float32), np.array(True), np.array(4.0, np.float32)],
        const=[False, True, True, True],
    )
    with pytest.raises(ORT_ERRORS, match=r"Quant node 'quant_node': input zeropt must be .*got bool"):
        run_model(model, feeds)
