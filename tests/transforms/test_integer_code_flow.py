"""Integer mode's int8 codes through quantizers, LeakyRelu, max pools, nearest resizes and concats
(``transforms/integer_code_flow.py``; the ops ``QConvCodes`` with ``out_table`` and ``MaxPoolCodes``).

The transform's contract is that every output keeps its bits. The expected outputs are those of the same model
prepared by every other step of the pipeline: there the values between the layers stay float32 and run through
the library's Quant kernel and onnxruntime's own LeakyRelu, MaxPool, Resize and Concat, none of which the rewritten
model uses. Both run through onnxruntime with the library registered by ``ortquant.register`` in the test process,
as a user's would; the rewritten model also through ``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import prepared_without, registered_session
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms.integer_chain import unchain

Q = "qonnx.custom_op.general"


def _quant(src: str, out: str, scale: float, bits: int = 4, signed: int = 1) -> tuple[onnx.NodeProto, list]:
    f = out
    inits = [_init("s_" + f, scale), _init("z_" + f, 0.0), _init("b_" + f, float(bits))]
    node = helper.make_node("Quant", [src, "s_" + f, "z_" + f, "b_" + f], [out], name="q_" + f, domain=Q,
                            signed=signed, narrow=0, rounding_mode="ROUND")  # fmt: skip
    return node, inits


def _conv(src: str, out: str, c: int, m: int, seed: int, k: int = 3) -> tuple[list[onnx.NodeProto], list]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((m, c, k, k)) * 0.4).astype(np.float32)
    ws = (0.02 + rng.random((m, 1, 1, 1)) * 0.05).astype(np.float32)
    inits = [_init("w" + out, w), _init("ws" + out, ws), _init("wz" + out, 0.0), _init("wb" + out, 4.0),
             _init("cb" + out, (rng.standard_normal(m) * 0.2).astype(np.float32))]  # fmt: skip
    nodes = [
        helper.make_node("Quant", ["w" + out, "ws" + out, "wz" + out, "wb" + out], ["wq" + out], name="wq_" + out,
                         domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", [src, "wq" + out, "cb" + out], [out], name="conv_" + out, pads=[k // 2] * 4,
                         kernel_shape=[k, k]),
    ]  # fmt: skip
    return nodes, inits


def _model(nodes: list, inits: list, c: int, h: int, w: int, outputs: list[str]) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, h, w])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _unet(*, leaky: float | None = None, pool_pads: bool = False, extra_output: bool = False) -> onnx.ModelProto:
    """x -> Quant -> conv a -> Quant(A) -> [MaxPool -> conv b -> Quant(B) -> Resize x2 -> Quant(A)] ++ Concat
    -> conv c (its input quantizer A, through the Concat) -> y. leaky: a LeakyRelu after the first Quant(A)."""
    nodes, inits = [], []
    for part in (_quant("x", "xq", 0.0625), _conv("xq", "ya", 3, 8, 1)):
        nodes += part[0] if isinstance(part[0], list) else [part[0]]
        inits += part[1]
    n, i = _quant("ya", "qa", 0.25)
    nodes.append(n)
    inits += i
    skip = "qa"
    if leaky is not None:
        nodes.append(helper.make_node("LeakyRelu", ["qa"], ["la"], name="leaky", alpha=leaky))
        n, i = _quant("la", "qla", 0.25)
        nodes.append(n)
        inits += i
        skip = "qla"
    pool_attrs = {"kernel_shape": [2, 2], "strides": [2, 2]}
    if pool_pads:
        pool_attrs["pads"] = [0, 0, 1, 1]
    nodes.append(helper.make_node("MaxPool", [skip], ["pa"], name="pool", **pool_attrs))
    cn, ci = _conv("pa", "yb", 8, 8, 2)
    nodes += cn
    inits += ci
    n, i = _quant("yb", "qb", 0.125)
    nodes.append(n)
    inits += i
    inits += [_init("roi", np.zeros(0)), _init("scales", [1.0, 1.0, 2.0, 2.0])]
    nodes.append(helper.make_node("Resize", ["qb", "roi", "scales"], ["rb"], name="up", mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))  # fmt: skip
    n, i = _quant("rb", "qrb", 0.25)
    nodes.append(n)
    inits += i
    nodes.append(helper.make_node("Concat", ["qrb", skip], ["cat"], name="cat", axis=1))
    cn, ci = _conv("cat", "y", 16, 4, 3)
    nodes += cn
    inits += ci
    return _model(nodes, inits, 3, 12, 16, ["y", *(["qa"] if extra_output else [])])


def _separable(bits: int = 4) -> onnx.ModelProto:
    """x -> Quant -> conv a -> Quant(A, 0.125) -> LeakyRelu(0.1) -> Quant(C, 0.0625) -> conv b -> y; A and C of
    ``bits`` bits (4: codes in [0, 15], the 16-entry lookup; 6: the 256-entry table)."""
    nodes, inits = [], []
    n, i = _quant("x", "xq", 0.0625)
    cn, ci = _conv("xq", "ya", 3, 8, 5)
    nodes += [n, *cn]
    inits += i + ci
    n, i = _quant("ya", "qa", 0.125, bits)
    nodes += [n, helper.make_node("LeakyRelu", ["qa"], ["la"], name="leaky", alpha=0.1015625)]
    inits += i
    n, i = _quant("la", "qc", 0.0625, bits)
    cn, ci = _conv("qc", "y", 8, 4, 6)
    nodes += [n, *cn]
    inits += i + ci
    return _model(nodes, inits, 3, 10, 20, ["y"])


def _check_same_bits(m: onnx.ModelProto, batch: int = 2) -> onnx.ModelProto:
    prepared = ortquant.prepare_model(m, integer=True)
    x = np.random.default_rng(7).standard_normal(
        (batch, *[d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]])
    )
    x = (x * 1.5).astype(np.float32)
    want = registered_session(prepared_without(m, "flow_integer_codes")).run(None, {"x": x})
    got = registered_session(prepared).run(None, {"x": x})
    api = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})
    assert len(got) == len(want)
    for g, a, w in zip(got, api, want, strict=True):
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))
        np.testing.assert_array_equal(a.view(np.uint32), w.view(np.uint32))
    return prepared


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in unchain(m)]


def test_unet_block_carries_codes_through_pool_resize_and_concat():
    prepared = _check_same_bits(_unet())
    ops = _ops(prepared)
    assert "Quant" not in ops  # the input's is the first layer's own; the others are codes or tables now
    assert "MaxPoolCodes" in ops and "MaxPool" not in ops
    assert ops.count("QConvCodes") == 2 and ops.count("QConv") == 1
    conv_b = next(n for n in unchain(prepared) if n.op_type == "QConvCodes" and n.output[0].startswith("yb"))
    table = next(list(a.ints) for a in conv_b.attribute if a.name == "out_table")
    # Quant(B = 0.125) then Quant(A = 0.25): code b (value b / 8) -> round-half-even(b / 2), stored + 8 (offset -8).
    for b in range(-8, 8):
        assert table[b + 8 + 128] == int(np.rint(b / 2)) + 8
    conv_a = next(n for n in unchain(prepared) if n.op_type == "QConvCodes" and n.output[0].startswith("ya"))
    assert all(a.name != "out_table" for a in conv_a.attribute)  # Quant(A) read as A: the identity


@pytest.mark.parametrize("bits", [4, 6])
def test_leaky_relu_between_quantizers_becomes_a_table(bits: int):
    prepared = _check_same_bits(_separable(bits))
    ops = _ops(prepared)
    assert "Quant" not in ops and "LeakyRelu" not in ops
    assert any(a.name == "out_table" for n in unchain(prepared) for a in n.attribute)


def test_leaky_relu_before_a_pool_folds_into_the_table():
    prepared = _check_same_bits(_unet(leaky=0.1015625))
    assert "LeakyRelu" not in _ops(prepared)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(lambda: _unet(extra_output=True), id="codes-value-is-a-graph-output"),
        pytest.param(lambda: _unet(pool_pads=True), id="padded-pool"),
        pytest.param(lambda: _unet(leaky=-0.5), id="decreasing-leaky-before-pool"),
    ],
)
def test_regions_that_cannot_carry_codes_stay_float(model):
    prepared = _check_same_bits(model())
    ops = _ops(prepared)
    assert "MaxPoolCodes" not in ops
    assert ops.count("Quant") >= 3


def _upsample(signed: int, pool: bool) -> onnx.ModelProto:
    """x -> Quant -> conv a -> Quant(A: 8 bits) -> [MaxPool 2x2 ->] Resize x2 (nearest) -> conv b (padded) -> y:
    the upsampling of ESPCN-style networks. Unsigned 8-bit A (values 0 .. 255) has no codes in [-128, 127] as they
    are: integer mode stores a - 128 and pads conv b with the stored code of 0, -128."""
    nodes, inits = [], []
    n, i = _quant("x", "xq", 0.0625)
    cn, ci = _conv("xq", "ya", 3, 8, 11)
    nodes += [n, *cn]
    inits += i + ci
    n, i = _quant("ya", "qa", 0.01, bits=8, signed=signed)
    nodes.append(n)
    inits += i
    src = "qa"
    if pool:
        nodes.append(helper.make_node("MaxPool", ["qa"], ["pa"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
        src = "pa"
    inits += [_init("roi", np.zeros(0)), _init("scales", [1.0, 1.0, 2.0, 2.0])]
    nodes.append(helper.make_node("Resize", [src, "roi", "scales"], ["ra"], name="up", mode="nearest",
                                  coordinate_transformation_mode="asymmetric", nearest_mode="floor"))  # fmt: skip
    cn, ci = _conv("ra", "y", 8, 3, 12)
    nodes += cn
    inits += ci
    return _model(nodes, inits, 3, 8, 12, ["y"])


@pytest.mark.parametrize("pool", [False, True], ids=["resize", "pool-resize"])
@pytest.mark.parametrize("signed", [0, 1], ids=["unsigned8", "signed8"])
def test_eight_bit_codes_through_resize(signed: int, pool: bool):
    prepared = _check_same_bits(_upsample(signed, pool))
    ops = _ops(prepared)
    assert "Quant" not in ops and ops.count("QConvCodes") == 1 and ops.count("QConv") == 1
    assert ("MaxPoolCodes" in ops) == pool and "MaxPool" not in ops
    up = next(n for n in unchain(prepared) if n.op_type == "Resize")
    assert up.output[0].endswith("__codes")


def test_maxpool_codes_rejects_bad_input():
    g = helper.make_graph(
        [helper.make_node("MaxPoolCodes", ["x"], ["y"], domain="ortquant.integer", kernel_shape=[3, 3])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [1, 2, 2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ortquant.integer", 1)])
    m.ir_version = 10
    s = registered_session(m)
    with pytest.raises(Exception, match="smaller than the window"):
        s.run(None, {"x": np.zeros((1, 2, 2, 5), np.int8)})


def test_maxpool_codes_matches_numpy():
    rng = np.random.default_rng(3)
    for shape, k in [
        ((2, 3, 9, 37), (2, 2)),
        ((1, 2, 7, 40), (3, 2)),
        ((1, 1, 10, 9), (1, 3)),
        ((1, 2, 18, 4), (9, 1)),
        # Short rows: 6 and 7 outputs (a 4-output step and a tail of 2 or 3), 3 outputs (the tail alone).
        ((1, 3, 12, 12), (2, 2)),
        ((2, 2, 9, 14), (3, 2)),
        ((2, 5, 6, 6), (2, 2)),
    ]:
        g = helper.make_graph(
            [helper.make_node("MaxPoolCodes", ["x"], ["y"], domain="ortquant.integer", kernel_shape=list(k))],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.INT8, list(shape))],
            [helper.make_tensor_value_info("y", TensorProto.INT8, None)],
        )
        m = helper.make_model(
            g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ortquant.integer", 1)]
        )
        m.ir_version = 10
        x = rng.integers(-128, 128, shape).astype(np.int8)
        (y,) = registered_session(m).run(None, {"x": x})
        n, c, h, w = shape
        oh, ow = h // k[0], w // k[1]
        want = x[:, :, : oh * k[0], : ow * k[1]].reshape(n, c, oh, k[0], ow, k[1]).max((3, 5))
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("op", ["leaky", "pool"])
def test_a_step_onnxruntime_refuses_is_left_for_it_to_refuse(op: str):
    """A LeakyRelu or MaxPool with an attribute its schema does not have: the region keeps it, and integer mode
    refuses the model as the default mode does (onnxruntime names the node), instead of folding it away."""
    m = _unet(leaky=0.1015625)
    node = next(n for n in m.graph.node if n.name == op)
    node.attribute.append(helper.make_attribute("narrow", 1))
    prepared = ortquant.prepare_model(m, integer=True)
    assert node.op_type in _ops(prepared), _ops(prepared)
    for integer in (False, True):
        with pytest.raises(Exception, match="Unrecognized attribute: narrow"):
            ortquant.InferenceSession(m, integer=integer)
