"""exact=True: qonnx's op-by-op float results bit for bit, where onnxruntime's default graph optimizations
(Conv+BatchNormalization folding, the NCHWc convolution, Add fusion) change them. Fixture built here: a
Brevitas-like block Quant -> Conv(c->c, 3x3) -> BatchNormalization -> Relu -> Conv -> Add(residual)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import assert_bitexact
from ortquant.transforms import PrepareOptions, apply_pipeline

sys.path.insert(0, str(Path(__file__).resolve().parent / "transforms"))
from _oracle import IR_VERSION, qonnx_run

GENERAL = "qonnx.custom_op.general"


def _block(c: int, hw: int) -> onnx.ModelProto:
    rng = np.random.default_rng(8)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "s"),
        numpy_helper.from_array(np.array(0.0, np.float32), "z"),
        numpy_helper.from_array(np.array(8.0, np.float32), "bw"),
        numpy_helper.from_array(f(c, c, 3, 3) * 0.1, "w1"),
        numpy_helper.from_array(f(c), "b1"),
        numpy_helper.from_array(np.abs(f(c)) + 0.5, "g"),
        numpy_helper.from_array(f(c), "beta"),
        numpy_helper.from_array(f(c), "mean"),
        numpy_helper.from_array(np.abs(f(c)) + 0.5, "var"),
        numpy_helper.from_array(f(c, c, 3, 3) * 0.1, "w2"),
    ]
    nodes = [
        helper.make_node("Quant", ["x", "s", "z", "bw"], ["q"], name="q", domain=GENERAL, signed=1, narrow=0),
        helper.make_node("Conv", ["q", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "g", "beta", "mean", "var"], ["bn"], name="bn"),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "q"], ["y"], name="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "exact",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, hw, hw])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(GENERAL, 1)])
    model.ir_version = IR_VERSION
    return model


@pytest.mark.parametrize("c,hw", [(8, 12), (32, 12), (64, 14)])
def test_exact_matches_qonnx_where_the_default_does_not(c, hw, tmp_path):
    model = _block(c, hw)
    x = np.random.default_rng(9).standard_normal((1, c, hw, hw)).astype(np.float32)
    want = qonnx_run(model, {"x": x})["y"]
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    for source in (model, str(path)):
        assert_bitexact(ortquant.InferenceSession(source, exact=True).run(None, {"x": x})[0], want)
    # The default mode disables the two optimizations that re-round a Conv in front of a quantizer (docs/ops.md,
    # "Default mode"); on this block that is enough for qonnx's bits.
    assert_bitexact(ortquant.InferenceSession(model).run(None, {"x": x})[0], want)
    # Evidence for both switches (onnxruntime 1.31 on x86): with every optimization on, some outputs move.
    so = ort.SessionOptions()
    ortquant.register(so)
    so.add_session_config_entry("optimization.disable_specified_optimizers", "")
    all_on = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    all_on_out = all_on.run(None, {"x": x})[0]
    assert not np.array_equal(all_on_out, want), "onnxruntime's optimizations no longer change this block: revisit"
    np.testing.assert_allclose(all_on_out, want, rtol=1e-4, atol=1e-4)
    # A C/C++ host gets the same with the two session options docs/ops.md names.
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.disable_prepacking", "1")
    got = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert_bitexact(got, want)


def test_exact_sets_the_options_on_the_callers_session_options():
    so = ort.SessionOptions()
    ortquant.InferenceSession(_block(8, 6), sess_options=so, exact=True)
    assert so.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert so.get_session_config_entry("session.disable_prepacking") == "1"


def test_exact_does_not_rewrite_the_model():
    model = _block(8, 6)
    prepared, changed = apply_pipeline(model, PrepareOptions(exact=True))
    assert prepared is model and changed == []


def test_exact_warns_when_the_thread_count_is_not_qonnxs(tmp_path):
    """qonnx runs onnxruntime with its default thread count; exact=True with another one says it may differ."""
    import warnings

    import onnxruntime as ort

    from conftest import make_node_model

    model, _ = make_node_model(
        "Quant",
        "qonnx.custom_op.general",
        [np.ones((2, 3), np.float32), np.array(0.5, np.float32), np.array(0.0, np.float32), np.array(4.0, np.float32)],
        const=[False, True, True, True],
    )
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    with pytest.warns(RuntimeWarning, match="exact=True with intra_op_num_threads=1"):
        ortquant.InferenceSession(model, so, exact=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ortquant.InferenceSession(model, exact=True)  # the default thread count: no warning
