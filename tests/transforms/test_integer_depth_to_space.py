"""Integer mode's DepthToSpace fusion (``transforms/integer_depth_to_space.py``, the QConv op's ``depth_to_space``
attributes): the pixel shuffle right after a lowered convolution, and a Relu after it, run inside the op. The
expected outputs come from the integer reference (``_integer_fixtures.qconv_reference``) and numpy's reshape and
transpose of ONNX's DepthToSpace definition, independent of the transform and the op; the models run through
``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import qconv_params, qconv_reference
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms.integer_depth_to_space import fuse_integer_depth_to_space

Q = "qonnx.custom_op.general"


def _model(c: int, m: int, hw: tuple[int, int], bs: int, mode: str, relu: bool):
    rng = np.random.default_rng(11)
    p = qconv_params(rng, m, c, [3, 3])
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], name="conv", pads=[1] * 4, kernel_shape=[3, 3]),
        helper.make_node("DepthToSpace", ["c"], ["d"], name="d2s", blocksize=bs, mode=mode),
    ]
    out = "d"
    if relu:
        nodes.append(helper.make_node("Relu", ["d"], ["y"], name="relu"))
        out = "y"
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, *hw])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], initializer=[_init(k, v) for k, v in p.items()],
    )  # fmt: skip
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    model.ir_version = 10
    return model, p


def _depth_to_space(y: np.ndarray, bs: int, mode: str) -> np.ndarray:
    """ONNX's definition (DepthToSpace-13) in numpy."""
    n, c, h, w = y.shape
    if mode == "DCR":
        t = y.reshape(n, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = y.reshape(n, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return t.reshape(n, c // (bs * bs), h * bs, w * bs)


@pytest.mark.parametrize(
    "bs,mode,hw,relu",
    [
        (2, "CRD", (6, 9), True),  # ESPCN's shuffle; 9-pixel rows: two SSE2 steps and a scalar tail
        (2, "DCR", (5, 8), True),
        (3, "DCR", (4, 7), False),  # the scalar loop
        (3, "CRD", (7, 5), True),
    ],
)
def test_fused_shuffle_matches_the_reference(bs, mode, hw, relu):
    m, p = _model(4, 2 * bs * bs, hw, bs, mode, relu)
    prepared = ortquant.prepare_model(m, integer=True)
    assert [n.op_type for n in prepared.graph.node] == ["QConv"], [n.op_type for n in prepared.graph.node]
    x = np.random.default_rng(3).standard_normal((2, 4, *hw)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = _depth_to_space(qconv_reference(x, p, [3, 3], relu=False), bs, mode)
    if relu:
        want = np.maximum(want, np.float32(0))
    assert got.shape == want.shape == (2, 2, hw[0] * bs, hw[1] * bs)
    np.testing.assert_array_equal(got, want)


def test_a_shuffle_whose_input_is_also_read_elsewhere_stays():
    m, _ = _model(4, 8, (4, 4), 2, "DCR", False)
    m.graph.output.append(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    prepared = ortquant.prepare_model(m, integer=True)
    assert "DepthToSpace" in [n.op_type for n in prepared.graph.node]
    assert fuse_integer_depth_to_space(prepared) is prepared


def _with_attrs(prepared: onnx.ModelProto, **attrs: object) -> onnx.ModelProto:
    node = next(n for n in prepared.graph.node if n.op_type == "QConv")
    kept = [a for a in node.attribute if a.name not in attrs]
    del node.attribute[:]
    node.attribute.extend([*kept, *(helper.make_attribute(k, v) for k, v in attrs.items())])
    return prepared


@pytest.mark.parametrize(
    "attrs,match",
    [
        ({"depth_to_space": 3}, r"attribute 'depth_to_space' 3: the 8 output channels are not a multiple of 9"),
        ({"depth_to_space": 0}, r"attribute 'depth_to_space' must be a block size in 1\.\.256, got 0"),
        ({"depth_to_space_mode": "XYZ"}, r"attribute 'depth_to_space_mode' must be DCR or CRD, got 'XYZ'"),
        ({"pool": [2, 2]}, r"attributes 'pool' and 'depth_to_space' cannot be combined"),
    ],
)
def test_malformed_shuffle_attributes_are_refused_by_name(attrs, match):
    m, _ = _model(4, 8, (4, 4), 2, "DCR", False)
    prepared = _with_attrs(ortquant.prepare_model(m, integer=True), **attrs)
    with pytest.raises(Exception, match=match):
        ortquant.InferenceSession(prepared)
