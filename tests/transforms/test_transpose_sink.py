"""``transforms/transpose_sink.py``: Transposes move down past per-element ops, nearest Resize and Concat to their
inverse. The models are channels-last U-Net blocks of standard ops, so stock onnxruntime runs the model as written
(the reference: moving values never changes one) and ``ortquant.InferenceSession`` runs the rewritten one."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant.transforms import ModelError
from ortquant.transforms.transpose_sink import sink_transposes

FIRST, LAST = [0, 3, 1, 2], [0, 2, 3, 1]


def _init(name: str, v: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(v, name)


def _unet(mode: str = "nearest", skip_axis: int = -1, out_last: bool = True) -> onnx.ModelProto:
    """x [N, H, W, 4] channels-last -> conv block -> (skip) -> MaxPool -> conv -> Resize x2 -> Concat(skip) -> conv."""
    rng = np.random.default_rng(0)
    inits = [
        _init("w0", (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32)),
        _init("w1", (rng.standard_normal((8, 8, 3, 3)) * 0.3).astype(np.float32)),
        _init("w2", (rng.standard_normal((4, 16, 3, 3)) * 0.3).astype(np.float32)),
        _init("roi", np.zeros(0, np.float32)),
        _init("scales", np.array([1, 2, 2, 1], np.float32)),
    ]
    t = helper.make_node
    nodes = [
        t("Transpose", ["x"], ["x_cf"], perm=FIRST),
        t("Conv", ["x_cf", "w0"], ["c0"], pads=[1] * 4),
        t("Transpose", ["c0"], ["c0_cl"], perm=LAST),
        t("LeakyRelu", ["c0_cl"], ["a0"], alpha=0.1),
        t("Relu", ["a0"], ["skip"]),  # read by the MaxPool branch and by the Concat
        t("Transpose", ["skip"], ["skip_cf"], perm=FIRST),
        t("MaxPool", ["skip_cf"], ["p0"], kernel_shape=[2, 2], strides=[2, 2]),
        t("Conv", ["p0", "w1"], ["c1"], pads=[1] * 4),
        t("Transpose", ["c1"], ["c1_cl"], perm=LAST),
        t("Relu", ["c1_cl"], ["a1"]),
        t("Resize", ["a1", "roi", "scales"], ["up"], mode=mode, coordinate_transformation_mode="asymmetric",
          nearest_mode="floor"),
        t("Concat", ["up", "skip"], ["cat"], axis=skip_axis),
        t("Transpose", ["cat"], ["cat_cf"], perm=FIRST),
        t("Conv", ["cat_cf", "w2"], ["c2"], pads=[1] * 4),
    ]  # fmt: skip
    out = "c2"
    if out_last:
        nodes.append(t("Transpose", ["c2"], ["y"], perm=LAST))
        out = "y"
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8, 10, 4])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return m


def _transposes(m: onnx.ModelProto) -> int:
    return sum(n.op_type == "Transpose" for n in m.graph.node)


def _stock(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("out_last", [True, False])
def test_a_unet_block_keeps_only_the_input_and_output_transposes(out_last):
    m = _unet(out_last=out_last)
    prepared = ortquant.prepare_model(m)
    assert _transposes(prepared) == (2 if out_last else 1), [n.op_type for n in prepared.graph.node]
    x = np.random.default_rng(1).standard_normal((2, 8, 10, 4)).astype(np.float32)
    got = ortquant.InferenceSession(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, _stock(m, x))


def test_the_resize_scales_follow_the_layout():
    prepared = sink_transposes(_unet())
    resize = next(n for n in prepared.graph.node if n.op_type == "Resize")
    scales = next(t for t in prepared.graph.initializer if t.name == resize.input[2])
    assert numpy_helper.to_array(scales).tolist() == [1, 1, 2, 2]
    concat = next(n for n in prepared.graph.node if n.op_type == "Concat")
    assert helper.get_attribute_value(concat.attribute[0]) == 1


def test_a_linear_resize_keeps_its_transposes():
    m = _unet(mode="linear")
    prepared = sink_transposes(m)
    resize = next(n for n in prepared.graph.node if n.op_type == "Resize")
    assert resize.input[2] == "scales"  # untouched: still channels-last
    x = np.random.default_rng(2).standard_normal((1, 8, 10, 4)).astype(np.float32)
    got = ortquant.InferenceSession(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, _stock(m, x))


def test_a_graph_output_transpose_stays_and_nothing_to_move_returns_the_model():
    m = _unet()
    prepared = sink_transposes(m)
    assert prepared.graph.node[-1].op_type == "Transpose" and prepared.graph.node[-1].output[0] == "y"
    again = sink_transposes(prepared)
    assert _transposes(again) == _transposes(prepared)
    plain = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        )
    )
    assert sink_transposes(plain) is plain


def test_a_malformed_transpose_is_left_for_onnxruntime_to_refuse():
    m = _unet()
    t = next(n for n in m.graph.node if n.output[0] == "c0_cl")
    t.attribute.append(helper.make_attribute("narrow", 1))  # not a Transpose attribute
    prepared = sink_transposes(m)
    assert any(n.output[0] == "c0_cl" and n.op_type == "Transpose" for n in prepared.graph.node)
    with pytest.raises(Exception, match="narrow"):
        ortquant.InferenceSession(m)


@pytest.mark.parametrize("name", ["roi", "scales"])
def test_a_resize_parameter_of_unknown_type_is_refused_in_one_line(name):
    # (fuzz find: an initializer with an unknown element type escaped as a KeyError from numpy)
    m = _unet()
    next(t for t in m.graph.initializer if t.name == name).data_type = 999
    with pytest.raises(ModelError, match=f"Resize node .*{name} initializer '{name}' has an unknown element type 999"):
        ortquant.prepare_model(m)
