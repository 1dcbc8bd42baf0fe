"""Tensors of high rank (ONNX sets no limit): shapes past the 8 dimensions a `Shape` holds inline (core/shape.h)
go to the heap, and every op computes the same values as on lower ranks. QONNX Quant with parameters broadcast from
a lower rank, linger's iqAdd with a broadcast operand and nGraph Quantize with axes, through onnxruntime, against
the numpy references."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import NP_TO_ONNX, assert_bitexact, run_node
from ortquant.reference import linger as lref
from ortquant.reference import ngraph as nref
from ortquant.reference import qonnx as qref

# ranks 8 (the inline capacity), 9 (one past it) and 12; sizes of 1 to 3 keep the tensors small
SHAPES = [(2, 1, 3, 1, 2, 1, 2, 3), (2, 1, 3, 1, 2, 1, 2, 3, 2), (1, 2, 1, 2, 1, 3, 1, 2, 1, 2, 1, 3)]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"rank{len(s)}")
def test_quant_broadcasts_parameters_on_high_rank(shape):
    rng = np.random.default_rng(len(shape))
    x = (rng.standard_normal(shape) * 10).astype(np.float32)
    scale = rng.uniform(0.1, 2, shape[-3:]).astype(np.float32)  # broadcast from the last three dimensions
    zp = np.float32(1)
    (y,) = run_node("Quant", "qonnx.custom_op.general", [x, scale, zp, np.float32(5)], const=[False, True, True, True],
                    attrs={"signed": 1, "narrow": 0, "rounding_mode": "ROUND"})  # fmt: skip
    assert_bitexact(y, qref.quant(x, scale, zp, np.float32(5), True, False, "ROUND"))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"rank{len(s)}")
def test_iqadd_broadcasts_on_high_rank(shape):
    rng = np.random.default_rng(10 + len(shape))
    x = rng.integers(-128, 128, shape).astype(np.int8)
    y = rng.integers(-128, 128, (1,) * (len(shape) - 2) + shape[-2:]).astype(np.int8)
    attrs = {"scale_x": 64.0, "scale_y": 32.0, "scale_o": 32.0, "platform_quant": "luna_quant"}
    (got,) = run_node("iqAdd", "thinker", [x, y], attrs=attrs, output_dtypes=[NP_TO_ONNX[np.dtype(np.int8)]])
    assert_bitexact(got, lref.iqadd(x, y, 64.0, 32.0, 32.0))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"rank{len(s)}")
def test_ngraph_quantize_with_axes_on_high_rank(shape):
    rng = np.random.default_rng(20 + len(shape))
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    axes = (len(shape) - 1, 2)
    scale = rng.uniform(0.05, 1, (shape[2], shape[-1])).astype(np.float32)
    zp = np.full((shape[2], shape[-1]), 3, np.uint8)
    (y,) = run_node("Quantize", "ngraph", [x, scale, zp], const=[False, True, True],
                    attrs={"axes": list(axes), "round_mode": "ROUND_NEAREST_TOWARD_EVEN"},
                    output_dtypes=[NP_TO_ONNX[np.dtype(np.uint8)]])  # fmt: skip
    assert_bitexact(y, nref.quantize(x, scale, zp, axes, "ROUND_NEAREST_TOWARD_EVEN"))
