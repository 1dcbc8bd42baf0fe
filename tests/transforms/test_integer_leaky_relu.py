"""Integer mode's LeakyRelu fusion (``transforms/integer_leaky_relu.py``, QConv's ``leaky_relu_alpha``): a LeakyRelu
right after a lowered convolution runs inside the op. The expected outputs come from the integer reference
(``_integer_fixtures.qconv_reference``) and numpy's float32 ``y >= 0 ? y : alpha * y``, independent of the transform
and the op; the models run through ``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import qconv_reference
from onnx import TensorProto, helper

import ortquant

Q = "qonnx.custom_op.general"


def _params(c: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    return {
        "w": (rng.standard_normal((c, c, 3, 3)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((c, 1, 1, 1)) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(4),
        "as": np.float32(0.05),
        "az": np.float32(0),
        "ab": np.float32(4),
        "cb": (rng.standard_normal(c) * 0.3).astype(np.float32),
    }


def _model(c: int, alpha: float | None, *, pool: bool = False, also_output: bool = False) -> onnx.ModelProto:
    """Quant(x) -> Conv (pads 1) -> LeakyRelu(alpha; absent: the default) [-> MaxPool 2x2]."""
    p = _params(c)
    kw = {} if alpha is None else {"alpha": alpha}
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], name="conv", pads=[1] * 4, kernel_shape=[3, 3]),
        helper.make_node("LeakyRelu", ["c"], ["y"], name="leaky", **kw),
    ]
    out = "y"
    if pool:
        nodes.append(helper.make_node("MaxPool", ["y"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
        out = "p"
    outs = [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)]
    if also_output:
        outs.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, 8, 10])], outs,
                          initializer=[_init(k, v) for k, v in p.items()])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _leaky(y: np.ndarray, alpha: float) -> np.ndarray:
    return np.where(y >= 0, y, np.float32(alpha) * y).astype(np.float32)


@pytest.mark.parametrize("alpha", [0.1, None, -0.5])
@pytest.mark.parametrize("pool", [False, True])
def test_leaky_relu_in_the_op_matches_the_reference(alpha, pool):
    m = _model(8, alpha, pool=pool)
    ops = [n.op_type for n in ortquant.prepare_model(m, integer=True).graph.node]
    assert "LeakyRelu" not in ops and (pool or "MaxPool" not in ops), ops
    x = (np.random.default_rng(3).standard_normal((2, 8, 8, 10)) * 0.5).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = _leaky(qconv_reference(x, _params(8), [3, 3], relu=False), 0.01 if alpha is None else alpha)
    if pool:
        want = want.reshape(2, 8, 4, 2, 5, 2).max((3, 5))
    np.testing.assert_array_equal(got, want)


def test_a_convolution_output_read_elsewhere_keeps_its_leaky_relu():
    m = _model(4, 0.2, also_output=True)
    assert "LeakyRelu" in [n.op_type for n in ortquant.prepare_model(m, integer=True).graph.node]


def test_relu_and_leaky_relu_together_is_a_clear_error():
    prepared = ortquant.prepare_model(_model(4, 0.2), integer=True)
    conv = next(n for n in prepared.graph.node if n.op_type == "QConv")
    conv.attribute.append(helper.make_attribute("relu", 1))
    with pytest.raises(Exception, match="attributes 'relu' and 'leaky_relu_alpha' cannot both apply"):
        ortquant.InferenceSession(prepared)


def test_a_malformed_leaky_relu_is_left_for_onnxruntime_to_refuse():
    m = _model(4, 0.2)
    next(n for n in m.graph.node if n.op_type == "LeakyRelu").attribute.append(helper.make_attribute("narrow", 1))
    assert "LeakyRelu" in [n.op_type for n in ortquant.prepare_model(m, integer=True).graph.node]
    with pytest.raises(Exception, match="narrow"):
        ortquant.InferenceSession(m, integer=True)
