"""explicit_pads: a Conv / MaxPool / AveragePool with auto_pad gets the explicit pads onnxruntime computes for it.
The oracle is onnxruntime itself: the node as written (auto_pad) against the rewritten one (pads), on integer-valued
data, so that every float sum is exact and the outputs must be equal bit for bit. Then a Brevitas-style QONNX
layer with ``auto_pad = SAME_UPPER`` through the public API in a fresh process: lowered in integer mode, the same
values as the default mode."""

from __future__ import annotations

import itertools

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _integer_fixtures import lowered_in_fresh_process
from _oracle import IR_VERSION
from onnx import TensorProto, helper, numpy_helper

from ortquant.transforms.explicit_pads import explicit_pads

Q = "qonnx.custom_op.general"


def _node_model(op: str, x_shape: list[int | str], attrs: dict[str, object], w: np.ndarray | None) -> onnx.ModelProto:
    inputs = ["x"] if w is None else ["x", "w"]
    node = helper.make_node(op, inputs, ["y"], **attrs)
    inits = [] if w is None else [numpy_helper.from_array(w, "w")]
    g = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_empty_tensor_value_info("y")],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = IR_VERSION
    return m


def _run(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _pads_of(m: onnx.ModelProto) -> list[int] | None:
    node = m.graph.node[0]
    assert not any(a.name == "auto_pad" for a in node.attribute)
    return next(list(a.ints) for a in node.attribute if a.name == "pads")


GEOMETRY = list(itertools.product([1, 2, 5, 7, 8, 12], [1, 2, 3, 4, 5], [1, 2, 3]))  # (size, kernel, stride)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER", "VALID"])
@pytest.mark.parametrize("op", ["Conv", "MaxPool", "AveragePool"])
def test_rewritten_node_gives_onnxruntimes_output(op, mode):
    rng = np.random.default_rng(5)
    checked = 0
    for size, k, s in GEOMETRY:
        if mode == "VALID" and k > size:
            continue
        h, w_ = size, size + 1
        x = rng.integers(-9, 10, (2, 3, h, w_)).astype(np.float32)
        attrs: dict[str, object] = {"auto_pad": mode, "kernel_shape": [k, k], "strides": [s, s]}
        wt = None
        if op == "Conv":
            wt = rng.integers(-5, 6, (4, 3, k, k)).astype(np.float32)
        if op == "AveragePool":
            attrs["count_include_pad"] = int(rng.integers(0, 2))
        m = _node_model(op, [2, 3, h, w_], attrs, wt)
        new = explicit_pads(m)
        if new is m:  # onnxruntime computes a negative padding here: left as written
            continue
        pads = _pads_of(new)
        assert pads is not None and min(pads) >= 0
        want, got = _run(m, x), _run(new, x)
        assert got.shape == want.shape and got.tobytes() == want.tobytes(), (size, k, s, pads)
        checked += 1
    assert checked >= len(GEOMETRY) // 2


def test_stride_one_needs_no_input_size():
    # SAME with stride 1 pads kernel - 1 whatever the size: a symbolic height and width are rewritten
    wt = np.ones((2, 3, 4, 3), np.float32)
    m = _node_model("Conv", ["n", 3, "h", "w"], {"auto_pad": "SAME_UPPER"}, wt)
    new = explicit_pads(m)
    assert _pads_of(new) == [1, 1, 2, 1]
    x = np.arange(3 * 9 * 11, dtype=np.float32).reshape(1, 3, 9, 11) % 7
    assert _run(new, x).tobytes() == _run(m, x).tobytes()


@pytest.mark.parametrize(
    ("op", "x_shape", "attrs"),
    [
        ("Conv", [1, 3, 8, 8], {"auto_pad": "SAME_UPPER", "dilations": [2, 2]}),  # dilated SAME: versions differ
        ("MaxPool", [1, 3, 8, 8], {"auto_pad": "SAME_UPPER", "kernel_shape": [3, 3], "ceil_mode": 1}),
        ("Conv", [1, 3, "h", "w"], {"auto_pad": "SAME_LOWER", "strides": [2, 2]}),  # stride 2, size unknown
        ("Conv", [1, 3, 8, 8], {"auto_pad": "NOTSET", "pads": [1, 1, 1, 1]}),
        ("Conv", [1, 3, 8, 8], {"auto_pad": 3}),  # malformed: onnxruntime judges it
    ],
)
def test_other_nodes_keep_auto_pad(op, x_shape, attrs):
    wt = np.ones((2, 3, 3, 3), np.float32) if op == "Conv" else None
    m = _node_model(op, x_shape, attrs, wt)
    assert explicit_pads(m) is m


def test_public_api_lowers_a_same_padded_qonnx_layer_in_a_fresh_process(tmp_path):
    rng = np.random.default_rng(9)
    inits = [
        numpy_helper.from_array(np.float32(0.05), "s_x"),
        numpy_helper.from_array(np.float32(0.0), "z"),
        numpy_helper.from_array(np.float32(4.0), "bits"),
        numpy_helper.from_array(rng.normal(0, 0.3, (6, 3, 4, 4)).astype(np.float32), "w_f"),
        numpy_helper.from_array(np.float32(0.04), "s_w"),
    ]
    nodes = [
        helper.make_node(
            "Quant", ["x", "s_x", "z", "bits"], ["xq"], domain=Q, signed=1, narrow=0, rounding_mode="ROUND"
        ),
        helper.make_node(
            "Quant", ["w_f", "s_w", "z", "bits"], ["wq"], domain=Q, signed=1, narrow=1, rounding_mode="ROUND"
        ),
        helper.make_node("Conv", ["xq", "wq"], ["y"], auto_pad="SAME_UPPER", kernel_shape=[4, 4]),
    ]
    g = helper.make_graph(
        nodes,
        "same_padded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 10, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(Q, 1)])
    m.ir_version = IR_VERSION
    path = tmp_path / "same.onnx"
    onnx.save(m, path)
    lowered_in_fresh_process(path, (2, 3, 10, 9), (2, 6, 10, 9), "explicit_pads", x_std=0.4)
