"""ortquant next to another custom-op library (onnxruntime-extensions) on the same SessionOptions, repeated
registration, and sessions with separate options.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import IR_VERSION, assert_bitexact, make_node_model
from ortquant.reference import qonnx as ref

ext = pytest.importorskip("onnxruntime_extensions")

QONNX = "qonnx.custom_op.general"
CONTRIB = "ai.onnx.contrib"
SCALE = np.float32(0.125)


def _mixed_model() -> onnx.ModelProto:
    """q = Quant(x) (ortquant), then (neg, pos) = NegPos(q) (onnxruntime-extensions), all three are outputs."""
    inits = [
        numpy_helper.from_array(SCALE, "scale"),
        numpy_helper.from_array(np.float32(0), "zeropt"),
        numpy_helper.from_array(np.float32(4), "bitwidth"),
    ]
    nodes = [
        helper.make_node(
            "Quant",
            ["x", "scale", "zeropt", "bitwidth"],
            ["q"],
            domain=QONNX,
            name="quant",
            signed=1,
        ),
        helper.make_node("NegPos", ["q"], ["neg", "pos"], domain=CONTRIB, name="negpos"),
    ]
    graph = helper.make_graph(
        nodes,
        "mixed",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("q", "neg", "pos")],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[
            helper.make_opsetid("", 17),
            helper.make_opsetid(QONNX, 1),
            helper.make_opsetid(CONTRIB, 1),
        ],
    )
    model.ir_version = IR_VERSION
    return model


def _x() -> np.ndarray:
    return np.linspace(-1.5, 1.5, 97, dtype=np.float32)


def _check_mixed(outputs: list[np.ndarray], x: np.ndarray) -> None:
    q, neg, pos = outputs
    want_q = ref.quant(x, SCALE, np.float32(0), np.float32(4), True, False, "ROUND")
    assert_bitexact(q, want_q)
    assert np.unique(want_q).size == 16  # all 4-bit levels present: the check is not trivial
    # NegPos splits its input into the non-positive and the positive part.
    np.testing.assert_array_equal(neg, np.where(want_q > 0, np.float32(0), want_q))
    np.testing.assert_array_equal(pos, np.where(want_q > 0, want_q, np.float32(0)))


@pytest.mark.parametrize("ortquant_first", [True, False])
def test_both_libraries_on_one_options(ortquant_first):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    if ortquant_first:
        ortquant.register(so)
        so.register_custom_ops_library(ext.get_library_path())
    else:
        so.register_custom_ops_library(ext.get_library_path())
        ortquant.register(so)
    sess = ort.InferenceSession(_mixed_model().SerializeToString(), so, providers=["CPUExecutionProvider"])
    x = _x()
    _check_mixed(sess.run(None, {"x": x}), x)


def test_ortquant_session_helper_with_extensions_options():
    so = ort.SessionOptions()
    so.register_custom_ops_library(ext.get_library_path())
    sess = ortquant.InferenceSession(_mixed_model(), sess_options=so)
    x = _x()
    _check_mixed(sess.run(None, {"x": x}), x)


def test_each_library_alone_lacks_the_other_op():
    """Negative control: the Quant node really comes from ortquant and NegPos from extensions."""
    model = _mixed_model().SerializeToString()
    only_ext = ort.SessionOptions()
    only_ext.register_custom_ops_library(ext.get_library_path())
    with pytest.raises(Exception, match="Quant"):
        ort.InferenceSession(model, only_ext, providers=["CPUExecutionProvider"])
    only_ours = ortquant.register(ort.SessionOptions())
    with pytest.raises(Exception, match="NegPos"):
        ort.InferenceSession(model, only_ours, providers=["CPUExecutionProvider"])


def _quant_model() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    x = np.linspace(-3, 3, 41, dtype=np.float32)
    return make_node_model(
        "Quant",
        QONNX,
        [x, np.float32(0.25), np.float32(0), np.float32(3)],
        const=[0, 1, 1, 1],
    )


def test_register_twice_is_harmless():
    model, feeds = _quant_model()
    so = ort.SessionOptions()
    assert ortquant.register(so) is so
    assert ortquant.register(so) is so
    ortquant.register(so)
    # Also through the session helper, which registers on the options it is given.
    for sess in (
        ort.InferenceSession(model.SerializeToString(), so),
        ortquant.InferenceSession(model, sess_options=so),
    ):
        (y,) = sess.run(None, feeds)
        assert_bitexact(y, ref.quant(feeds["in0"], np.float32(0.25), np.float32(0), np.float32(3)))


def test_raw_double_registration_is_harmless():
    """onnxruntime refuses the same domain twice on one options object ("Domain already set in registry"); the
    library marks the options it registered on and skips them the second time (issue 9)."""
    model, feeds = _quant_model()
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    so.register_custom_ops_library(ortquant.library_path())
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    (y,) = sess.run(None, feeds)
    assert_bitexact(y, ref.quant(feeds["in0"], np.float32(0.25), np.float32(0), np.float32(3)))


def test_two_sessions_with_separate_options():
    model, feeds = _quant_model()
    want = ref.quant(feeds["in0"], np.float32(0.25), np.float32(0), np.float32(3))
    so_a = ortquant.register(ort.SessionOptions())
    so_b = ort.SessionOptions()
    so_b.intra_op_num_threads = 1
    so_b.register_custom_ops_library(ext.get_library_path())
    ortquant.register(so_b)
    a = ort.InferenceSession(model.SerializeToString(), so_a, providers=["CPUExecutionProvider"])
    b = ort.InferenceSession(model.SerializeToString(), so_b, providers=["CPUExecutionProvider"])
    c = ort.InferenceSession(_mixed_model().SerializeToString(), so_b, providers=["CPUExecutionProvider"])
    for sess in (a, b):
        assert_bitexact(sess.run(None, feeds)[0], want)
    del a  # releasing one session leaves the others (and the library) working
    assert_bitexact(b.run(None, feeds)[0], want)
    x = _x()
    _check_mixed(c.run(None, {"x": x}), x)
