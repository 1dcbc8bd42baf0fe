"""rewrite_channels_last: qonnx.custom_op.channels_last Conv / MaxPool / BatchNormalization (qonnx 1.0.0's
channels_last package) vs qonnx's execute_onnx on the unmodified model, bit for bit. Fixtures built here with
onnx.helper (an hls4ml-like NHWC block: Conv -> BatchNormalization -> Relu -> MaxPool, and a 1-D Conv)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _oracle import IR_VERSION, ort_with_library, qonnx_run
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import assert_bitexact
from ortquant.cli import main
from ortquant.transforms.channels_last import CHANNELS_LAST, rewrite_channels_last


def _nhwc_block(cin: int = 3, cout: int = 8, hw: int = 9) -> onnx.ModelProto:
    rng = np.random.default_rng(4)
    w = rng.standard_normal((cout, 3, 3, cin)).astype(np.float32)  # channels-last weights (O, KH, KW, I)
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "b"),
        numpy_helper.from_array((rng.random(cout) + 0.5).astype(np.float32), "gamma"),
        numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "beta"),
        numpy_helper.from_array(rng.standard_normal(cout).astype(np.float32), "mean"),
        numpy_helper.from_array((rng.random(cout) + 0.5).astype(np.float32), "var"),
    ]
    nodes = [
        helper.make_node(
            "Conv",
            ["x", "w", "b"],
            ["c"],
            name="conv",
            domain=CHANNELS_LAST,
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
            strides=[1, 1],
            dilations=[1, 1],
            group=1,
        ),
        helper.make_node(
            "BatchNormalization",
            ["c", "gamma", "beta", "mean", "var"],
            ["bn"],
            name="bn",
            domain=CHANNELS_LAST,
            epsilon=1e-3,
            momentum=0.9,
        ),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node(
            "MaxPool",
            ["r"],
            ["y"],
            name="pool",
            domain=CHANNELS_LAST,
            kernel_shape=[2, 2],
            strides=[2, 2],
            pads=[0, 0, 0, 0],
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "nhwc",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, hw, hw, cin])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, hw // 2, hw // 2, cout])],
        inits,
    )
    # qonnx's channels_last transformation writes the NHWC shapes; its shape inference needs them
    graph.value_info.extend(
        helper.make_tensor_value_info(v, TensorProto.FLOAT, [2, hw, hw, cout]) for v in ("c", "bn", "r")
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(CHANNELS_LAST, 13)]
    )
    model.ir_version = IR_VERSION
    return model


@pytest.mark.parametrize("cin,cout,hw", [(3, 8, 9), (16, 32, 8)])
def test_channels_last_block_matches_qonnx(cin, cout, hw, tmp_path):
    model = _nhwc_block(cin, cout, hw)
    x = np.random.default_rng(5).standard_normal((2, hw, hw, cin)).astype(np.float32)
    want = qonnx_run(model, {"x": x})["y"]
    path = tmp_path / "nhwc.onnx"
    onnx.save(model, path)
    # exact=True: qonnx runs Conv and BatchNormalization in separate sessions (no Conv+BN folding)
    got = ortquant.InferenceSession(str(path), exact=True).run(None, {"x": x})[0]
    assert_bitexact(got, want)
    out = tmp_path / "prepared.onnx"
    assert main(["prepare", str(path), str(out)]) == 0
    assert_bitexact(ort_with_library(str(out), {"x": x}, exact=True)[0], want)
    # the default mode runs too (onnxruntime may fold Conv+BN: float differences of a few ulps are allowed there)
    np.testing.assert_allclose(ortquant.InferenceSession(str(path)).run(None, {"x": x})[0], want, rtol=1e-5, atol=1e-5)


def test_conv1d_channels_last():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 3, 5)).astype(np.float32)  # (O, K, I)
    node = helper.make_node(
        "Conv",
        ["x", "w"],
        ["y"],
        name="c1",
        domain=CHANNELS_LAST,
        kernel_shape=[3],
        pads=[1, 1],
        strides=[1],
        dilations=[1],
        group=1,
    )
    graph = helper.make_graph(
        [node],
        "c1d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 7, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 7, 4])],
        [numpy_helper.from_array(w, "w")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(CHANNELS_LAST, 1)])
    model.ir_version = IR_VERSION
    x = rng.standard_normal((1, 7, 5)).astype(np.float32)
    assert_bitexact(ortquant.InferenceSession(model).run(None, {"x": x})[0], qonnx_run(model, {"x": x})["y"])


def test_unknown_channels_last_op_is_a_clear_error():
    node = helper.make_node("Gemm", ["x", "w"], ["y"], name="g", domain=CHANNELS_LAST)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(CHANNELS_LAST, 1)])
    with pytest.raises(ortquant.transforms.ModelError, match="Gemm node 'g'"):
        rewrite_channels_last(model)


def test_channels_last_attributes_are_passed_as_they_are():
    """An empty list (strides=[]) used to crash the rewrite in onnx.helper.make_node; it now reaches the standard
    Conv unchanged, for onnxruntime to judge, naming the node."""
    model = _nhwc_block()
    conv = next(n for n in model.graph.node if n.name == "conv")
    strides = next(a for a in conv.attribute if a.name == "strides")
    del strides.ints[:]
    out = rewrite_channels_last(model)
    std = next(n for n in out.graph.node if n.name == "conv")
    assert std.domain == "" and next(a for a in std.attribute if a.name == "strides").ints == []


def test_channels_last_node_without_inputs_is_a_clear_error():
    model = _nhwc_block()
    del next(n for n in model.graph.node if n.name == "pool").input[:]
    with pytest.raises(ortquant.transforms.ModelError, match="MaxPool node 'pool': input 0"):
        rewrite_channels_last(model)


def test_channels_last_truncated_weight_is_a_clear_error():
    model = _nhwc_block()
    w = next(t for t in model.graph.initializer if t.name == "w")
    w.raw_data = w.raw_data[:-5]
    with pytest.raises(ortquant.transforms.ModelError, match=r"Conv node 'conv'.*initializer 'w'.*raw data"):
        rewrite_channels_last(model)
    with pytest.raises(ortquant.transforms.ModelError, match="Conv node 'conv'"):
        ortquant.prepare_model(model)


def test_channels_last_weight_of_another_rank_is_a_clear_error():
    model = _nhwc_block()
    w = next(t for t in model.graph.initializer if t.name == "w")
    w.CopyFrom(numpy_helper.from_array(np.ones((8, 27), np.float32), "w"))
    with pytest.raises(ortquant.transforms.ModelError, match="Conv node 'conv': the weight 'w' has rank 2"):
        rewrite_channels_last(model)


def test_unnamed_channels_last_node_is_named_by_its_output():
    model = _nhwc_block()
    pool = next(n for n in model.graph.node if n.name == "pool")
    pool.name = ""
    pool.output.append("indices")
    with pytest.raises(ortquant.transforms.ModelError, match="MaxPool node 'y'"):
        rewrite_channels_last(model)
