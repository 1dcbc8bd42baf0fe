"""Integer mode's MaxPool fusion (``transforms/integer_maxpool.py``, the QConv op's ``pool`` attribute): a
non-overlapping, unpadded MaxPool right after a lowered convolution runs inside the op. The expected outputs are
computed here from the integer reference (act codes, an int64 convolution, one float64 rescale) and a numpy max
over the windows, independent of the transform and of the op; the models run through ``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import qconv_params, qconv_reference
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms.integer_maxpool import fuse_integer_maxpool

Q = "qonnx.custom_op.general"


def _model(
    x_shape: list, k: list[int], pool: dict, *, extra_output: bool = False, opset: int = 17
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Quant -> Conv (pads 1) -> Relu -> MaxPool(**pool) -> y; 1-D when len(k) == 1."""
    p = qconv_params(np.random.default_rng(7), 6, x_shape[1], k)
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], name="conv", pads=[1] * (2 * len(k)), kernel_shape=k),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["y"], name="pool", **pool),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], outputs,
        initializer=[_init(name, v) for name, v in p.items()],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, p


def _want(x: np.ndarray, p: dict[str, np.ndarray], k: list[int], window: list[int]) -> np.ndarray:
    """The integer-mode convolution (pads 1, Relu) of the reference, then a floor max pool of ``window``."""
    y = qconv_reference(x, p, k)
    if len(k) == 1:
        y, window = y[:, :, None, :], [1, *window]
    ph, pw = window
    n, m, h, w = y.shape
    y = y[:, :, : h // ph * ph, : w // pw * pw].reshape(n, m, h // ph, ph, w // pw, pw).max(axis=(3, 5))
    return y[:, :, 0, :] if len(k) == 1 else y


@pytest.mark.parametrize(
    "x_shape,window",
    [
        ([2, 4, 12, 16], [2, 2]),  # whole windows; 8-pixel output rows (the SSE2 loop)
        ([3, 4, 11, 13], [2, 2]),  # odd sizes: the last row and column are dropped (floor)
        ([1, 8, 9, 22], [3, 2]),  # 3-row windows, 11 outputs per row (SSE2 steps and a scalar tail)
        ([2, 4, 10, 9], [2, 3]),  # 3-wide windows: the scalar loop
        # Small planes (float32 values pooled, then quantized): rows of 6, 3 and 5 outputs end in the 2- and
        # 1-output vector steps.
        ([1, 4, 12, 12], [2, 2]),
        ([2, 4, 6, 6], [2, 2]),
        ([1, 4, 9, 11], [3, 2]),
    ],
)
def test_fused_2d_pool_matches_the_reference(x_shape, window):
    m, p = _model(x_shape, [3, 3], {"kernel_shape": window, "strides": window})
    prepared = ortquant.prepare_model(m, integer=True)
    assert [n.op_type for n in prepared.graph.node] == ["QConv"], [n.op_type for n in prepared.graph.node]
    pool = next(a for a in prepared.graph.node[0].attribute if a.name == "pool")
    assert list(pool.ints) == window
    x = np.random.default_rng(1).standard_normal(x_shape).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = _want(x, p, [3, 3], window)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("opset", [11, 17])  # Squeeze takes axes as an attribute before opset 13
def test_fused_1d_pool_behind_the_squeeze(opset):
    m, p = _model([2, 4, 37], [3], {"kernel_shape": [2], "strides": [2]}, opset=opset)
    prepared = ortquant.prepare_model(m, integer=True)
    ops = [n.op_type for n in prepared.graph.node]
    assert "MaxPool" not in ops and "QConv" in ops, ops
    x = np.random.default_rng(2).standard_normal((2, 4, 37)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = _want(x, p, [3], [2])
    assert got.shape == want.shape == (2, 6, 18)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "pool,extra_output",
    [
        ({"kernel_shape": [3, 3], "strides": [2, 2]}, False),  # overlapping windows
        ({"kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1]}, False),  # padded
        ({"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}, False),  # ceil rounding
        ({"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 2]}, False),
        ({"kernel_shape": [2, 2], "strides": [2, 2]}, True),  # the convolution's output is also a graph output
        # an attribute MaxPool does not have: onnxruntime refuses the node, so it stays for it to refuse
        ({"kernel_shape": [2, 2], "strides": [2, 2], "narrow": 1}, False),
        # storage_order must be 0 or 1 (onnxruntime's MaxPool kernel refuses 2)
        ({"kernel_shape": [2, 2], "strides": [2, 2], "storage_order": 2}, False),
    ],
)
def test_other_pools_stay_as_they_are(pool, extra_output):
    m, _ = _model([1, 4, 12, 12], [3, 3], pool, extra_output=extra_output)
    lowered = ortquant.prepare_model(m, integer=True)
    assert [n.op_type for n in lowered.graph.node] == ["QConv", "MaxPool"]
    assert not any(a.name == "pool" for a in lowered.graph.node[0].attribute)
    assert fuse_integer_maxpool(lowered) is lowered


def test_a_same_padded_pool_is_taken_where_it_pads_nothing():
    # auto_pad SAME_UPPER becomes explicit pads (explicit_pads): none for a 12 x 12 output and 2 x 2 windows, so
    # the pool goes into the QConv; one row and column for 13 x 13, so it stays a MaxPool
    m, p = _model([1, 4, 12, 12], [3, 3], {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]})
    lowered = ortquant.prepare_model(m, integer=True)
    assert [n.op_type for n in lowered.graph.node] == ["QConv"]
    x = np.random.default_rng(2).normal(0, 1, (1, 4, 12, 12)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, _want(x, p, [3, 3], [2, 2]))
    m, _ = _model([1, 4, 13, 13], [3, 3], {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]})
    lowered = ortquant.prepare_model(m, integer=True)
    assert [n.op_type for n in lowered.graph.node] == ["QConv", "MaxPool"]
    x = np.random.default_rng(3).normal(0, 1, (1, 4, 13, 13)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = ortquant.InferenceSession(m).run(None, {"x": x})[0]
    assert got.shape == want.shape == (1, 6, 7, 7)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.max(np.abs(want))))


def test_a_model_without_qconv_is_returned_as_is():
    m, _ = _model([1, 4, 12, 12], [3, 3], {"kernel_shape": [2, 2], "strides": [2, 2]})
    assert fuse_integer_maxpool(m) is m


def test_a_pool_window_larger_than_the_output_is_a_clear_error():
    m, _ = _model([1, 4, 12, 12], [3, 3], {"kernel_shape": [2, 2], "strides": [2, 2]})
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "h"  # the height is not known when preparing
    sess = ortquant.InferenceSession(m, integer=True)
    match = r"convolution's output is 1 x 12, smaller than the fused max pool window 2 x 2"
    with pytest.raises(Exception, match=match):
        sess.run(None, {"x": np.zeros((1, 4, 1, 12), np.float32)})


@pytest.mark.parametrize("bad", [[0, 2], [2], [2, 2, 2], [1 << 17, 1]])
def test_a_malformed_pool_attribute_is_refused_by_name(bad):
    m, _ = _model([1, 4, 12, 12], [3, 3], {"kernel_shape": [2, 2], "strides": [2, 2]})
    prepared = ortquant.prepare_model(m, integer=True)
    node = prepared.graph.node[0]
    attrs = [a for a in node.attribute if a.name != "pool"]
    del node.attribute[:]
    node.attribute.extend([*attrs, helper.make_attribute("pool", bad)])
    with pytest.raises(Exception, match=r"attribute 'pool' must be 2 window sizes \[pH, pW\] in 1\.\.65536"):
        ortquant.InferenceSession(prepared)


_PATH_SCRIPT = """
import sys, numpy as np
sys.path.insert(0, sys.argv[1])
import test_integer_maxpool as t
import ortquant
for shape, window in [([2, 4, 12, 16], [2, 2]), ([1, 8, 9, 22], [3, 2]), ([1, 4, 12, 12], [2, 2]),
                      ([2, 4, 6, 6], [2, 2]), ([1, 4, 9, 11], [3, 2]), ([2, 4, 10, 9], [2, 3])]:
    m, p = t._model(shape, [3, 3], {"kernel_shape": window, "strides": window})
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, t._want(x, p, [3, 3], window))
print("ok")
"""


@pytest.mark.parametrize("isa", ortquant.kernels.supported_isas())
def test_fused_pool_on_every_path(isa: str) -> None:
    """The pooled rows' vector steps and tails with the op library on each ISA path (ORTQUANT_ISA in a fresh
    process: the scalar path pools without vectors)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "ORTQUANT_ISA": isa}
    run = subprocess.run([sys.executable, "-c", _PATH_SCRIPT, str(Path(__file__).resolve().parent)],
                         capture_output=True, text=True, env=env, timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
