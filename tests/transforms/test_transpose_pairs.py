"""cancel_transpose_pairs: Transpose -> per-element ops -> inverse Transpose loses its two Transposes; the model's
outputs stay the same bits as qonnx's execute_onnx on the unmodified model. Fixtures: hls4ml-like channels-last
blocks built here (qonnx.custom_op.channels_last Conv, a Quant / LeakyRelu chain between layers)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _oracle import IR_VERSION, qonnx_run
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import assert_bitexact
from ortquant.transforms.channels_last import CHANNELS_LAST, rewrite_channels_last
from ortquant.transforms.integer_chain import unchain
from ortquant.transforms.transpose_pairs import cancel_transpose_pairs

Q = "qonnx.custom_op.general"


def _quant(x: str, y: str, scale: str = "s", bits: str = "b") -> onnx.NodeProto:
    return helper.make_node("Quant", [x, scale, "z", bits], [y], domain=Q, signed=1, narrow=0, rounding_mode="ROUND")


def _block(scale_shape: tuple[int, ...] = (), extra_reader: bool = False) -> onnx.ModelProto:
    """x (NHWC) -> Quant -> Conv(cl) -> Quant -> LeakyRelu -> Quant -> Conv(cl) -> y."""
    rng = np.random.default_rng(7)
    inits = [
        numpy_helper.from_array(np.full(scale_shape, 0.125, np.float32), "s"),
        numpy_helper.from_array(np.float32(0.0), "z"),
        numpy_helper.from_array(np.float32(4.0), "b"),
        numpy_helper.from_array(rng.integers(-3, 4, (4, 3, 3, 3)).astype(np.float32), "w1"),
        numpy_helper.from_array(rng.integers(-3, 4, (5, 1, 1, 4)).astype(np.float32), "w2"),
    ]
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1}
    nodes = [
        _quant("x", "q0"),
        helper.make_node("Conv", ["q0", "w1"], ["c1"], name="conv1", domain=CHANNELS_LAST, **conv),
        _quant("c1", "q1"),
        helper.make_node("LeakyRelu", ["q1"], ["l1"], alpha=0.25),
        _quant("l1", "q2"),
        helper.make_node(
            "Conv",
            ["q2", "w2"],
            ["y"],
            name="conv2",
            domain=CHANNELS_LAST,
            **{**conv, "kernel_shape": [1, 1], "pads": [0, 0, 0, 0]},
        ),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 6, 5])]
    if extra_reader:
        outputs.append(helper.make_tensor_value_info("l1", TensorProto.FLOAT, [1, 6, 6, 4]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 6, 3])],
                          outputs, initializer=inits)  # fmt: skip
    shapes = {"q0": [1, 6, 6, 3], "c1": [1, 6, 6, 4], "q1": [1, 6, 6, 4], "q2": [1, 6, 6, 4]}
    if not extra_reader:
        shapes["l1"] = [1, 6, 6, 4]
    g.value_info.extend(helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in shapes.items())
    m = helper.make_model(
        g,
        opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(Q, 1), helper.make_opsetid(CHANNELS_LAST, 1)],
    )
    m.ir_version = IR_VERSION
    return m


def _x() -> np.ndarray:
    return np.random.default_rng(3).standard_normal((1, 6, 6, 3)).astype(np.float32)


def _transposes(m: onnx.ModelProto) -> int:
    return sum(n.op_type == "Transpose" for n in m.graph.node)


def test_pair_around_quant_chain_is_removed_and_results_are_qonnx_bits() -> None:
    m = _block()
    first = rewrite_channels_last(m)
    assert _transposes(first) == 4  # in / out of each layer
    out = cancel_transpose_pairs(first)
    assert _transposes(out) == 2  # the model's input and output layout stay
    assert [n.op_type for n in out.graph.node if n.op_type != "Transpose"] == [
        "Quant", "Conv", "Quant", "LeakyRelu", "Quant", "Conv",
    ]  # fmt: skip
    ref = qonnx_run(m, {"x": _x()})
    for integer in (False, True):
        (y,) = ortquant.InferenceSession(m.SerializeToString(), integer=integer).run(None, {"x": _x()})
        if integer:  # integer mode: exact sums, one rescale (docs/ops.md); the layers here are exact in float too
            np.testing.assert_allclose(y, ref["y"], rtol=0, atol=1e-6)
        else:
            assert_bitexact(y, ref["y"])


def test_integer_mode_fuses_the_quantizer_once_the_pair_is_gone() -> None:
    """The quantizer right before the second layer is its QConv's own input quantizer once no Transpose separates
    them (and the Quant -> LeakyRelu between the layers then folds into the first layer's output table:
    integer_code_flow, and the output Transpose into the second layer: integer_channels_last); the first layer reads
    the model's NHWC input through the input Transpose (the grid path)."""
    prepared = ortquant.prepare_model(_block(), integer=True)
    nodes = unchain(prepared)
    ops = [n.op_type for n in nodes]
    assert ops == ["Quant", "Transpose", "QConvCodes", "QConv"]
    assert nodes[3].input[0] == nodes[2].output[0]  # the second layer reads the codes


def test_per_channel_parameter_keeps_the_pair() -> None:
    out = cancel_transpose_pairs(rewrite_channels_last(_block(scale_shape=(4,))))
    assert _transposes(out) == 4


def test_value_read_elsewhere_keeps_the_pair() -> None:
    first = rewrite_channels_last(_block(extra_reader=True))
    assert cancel_transpose_pairs(first) is first


@pytest.mark.parametrize("perms", [([0, 2, 3, 1], [0, 2, 3, 1]), ([0, 2, 3, 1], [0, 3, 1, 2])])
def test_only_inverse_permutations_cancel(perms: tuple[list[int], list[int]]) -> None:
    p, q = perms
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=p),
        helper.make_node("Relu", ["t"], ["r"]),
        helper.make_node("Transpose", ["r"], ["y"], perm=q),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 3, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = IR_VERSION
    out = cancel_transpose_pairs(m)
    x = np.random.default_rng(0).standard_normal((1, 2, 3, 4)).astype(np.float32)
    expect = np.transpose(np.maximum(np.transpose(x, p), 0), q)
    if q == [0, 3, 1, 2]:
        assert [n.op_type for n in out.graph.node] == ["Relu"]
    else:
        assert out is m
    (y,) = ortquant.InferenceSession(out.SerializeToString()).run(None, {"x": x})
    assert_bitexact(y, expect)
