"""fold_weight_quantizers: constant-input QONNX quantizers become initializers holding exactly the op's output."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant import kernels
from ortquant.reference import qonnx as ref
from ortquant.transforms import PrepareOptions, apply_pipeline
from ortquant.transforms.fold_weight_quantizers import fold_weight_quantizers, foldable_nodes
from ortquant.transforms.integer_chain import unchain

MODELS = Path(__file__).resolve().parents[2] / "models"
Q = "qonnx.custom_op.general"


def _weight_quant_model(rounding: str = "ROUND", signed: int = 1, narrow: int = 1) -> onnx.ModelProto:
    """x [2, 8] -> MatMul with a Quant'd constant weight [8, 4] (per-column scale), and a BipolarQuant'd one."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    s = (0.05 + rng.random((1, 4))).astype(np.float32) / 7
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(s, "ws"),
        numpy_helper.from_array(np.float32(0), "wz"),
        numpy_helper.from_array(np.float32(4), "wb"),
        numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "v"),
        numpy_helper.from_array(np.float32(0.25), "vs"),
    ]
    nodes = [
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="qw", domain=Q, rounding_mode=rounding,
                         signed=signed, narrow=narrow),
        helper.make_node("BipolarQuant", ["v", "vs"], ["vq"], name="bq", domain=Q),
        helper.make_node("MatMul", ["x", "wq"], ["h"], name="mm"),
        helper.make_node("MatMul", ["h", "vq"], ["y"], name="mm2"),
    ]  # fmt: skip
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("rounding", ["ROUND", "FLOOR", "HALF_UP"])
def test_folded_initializers_equal_the_ops_output(rounding: str) -> None:
    m = _weight_quant_model(rounding)
    out = fold_weight_quantizers(m)
    assert out is not m
    assert [n.op_type for n in out.graph.node] == ["MatMul", "MatMul"]
    inits = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    assert "w" not in inits and "ws" not in inits  # parameters only the quantizer read are dropped
    src = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    want_w = kernels.quant(src["w"], src["ws"], src["wz"], src["wb"], True, True, rounding)
    assert np.array_equal(inits["wq"].view(np.uint32), want_w.view(np.uint32))
    # and the independent numpy reference of the op agrees
    ref_w = ref.quant(src["w"], src["ws"], src["wz"], src["wb"], signed=True, narrow=True, rounding_mode=rounding)
    assert np.array_equal(inits["wq"], ref_w)
    assert np.array_equal(inits["vq"], kernels.bipolar_quant(src["v"], src["vs"]))
    assert inits["wq"].dtype == np.float32


def test_folded_model_runs_and_matches_unfolded() -> None:
    m = _weight_quant_model()
    x = np.random.default_rng(0).standard_normal((2, 8)).astype(np.float32)
    a = ortquant.InferenceSession(m, exact=True).run(None, {"x": x})[0]
    b = ortquant.InferenceSession(m).run(None, {"x": x})[0]
    np.testing.assert_array_equal(a, b)  # MatMul sums in the same order either way


def test_exact_keeps_the_quantizers_and_default_folds() -> None:
    m = _weight_quant_model()
    out, changed = apply_pipeline(m, PrepareOptions(exact=True))
    assert out is m and "fold_weight_quantizers" not in changed
    out, changed = apply_pipeline(m, PrepareOptions())
    assert "fold_weight_quantizers" in changed
    assert not any(n.op_type in ("Quant", "BipolarQuant") for n in out.graph.node)


def test_activation_quantizers_and_overridable_initializers_stay() -> None:
    m = _weight_quant_model()
    # an initializer that is also a graph input can be fed per run: not constant
    m.graph.input.append(helper.make_tensor_value_info("ws", TensorProto.FLOAT, [1, 4]))
    assert [n.name for n in foldable_nodes(m)] == ["bq"]


def test_nothing_to_fold_returns_the_input() -> None:
    m = _weight_quant_model()
    del m.graph.node[:2]
    m.graph.node[0].input[1] = "w"
    m.graph.node[1].input[1] = "v"
    assert fold_weight_quantizers(m) is m


def test_brevitas_cnn_default_mode_matches_exact_closely() -> None:
    m = onnx.load(str(MODELS / "cnn_w4a4.onnx"))
    folded = fold_weight_quantizers(m)
    assert sum(n.op_type == "Quant" for n in m.graph.node) - sum(n.op_type == "Quant" for n in folded.graph.node) == 4
    data = np.load(MODELS / "cnn_w4a4.npz")
    x = data["input_b4"]
    exact = ortquant.InferenceSession(m, exact=True).run(None, {"global_in": x})[0]
    np.testing.assert_array_equal(exact, data["output_b4"])
    fast = ortquant.InferenceSession(m).run(None, {"global_in": x})[0]
    # The float convolution may sum in another order once its weights are pre-packed: a few float32 ulps at most
    # (an activation quantizer can flip a step in rare ties; none on these inputs).
    np.testing.assert_allclose(fast, exact, rtol=0, atol=1e-5)


def test_external_data_weights_keep_their_quantizer(tmp_path):
    """A weight stored as external data cannot be read by a ModelProto transform: its node stays (and ortquant
    computes it once at session creation); the in-model BipolarQuant weight is still folded."""
    model = _weight_quant_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, location="m.data", size_threshold=128)
    header = onnx.load(path, load_external_data=False)
    assert any(t.name == "w" and t.data_location == TensorProto.EXTERNAL for t in header.graph.initializer)
    names = [n.name for n in foldable_nodes(header)]
    assert "qw" not in names
    assert all(
        t.data_location != TensorProto.EXTERNAL
        for n in foldable_nodes(header)
        for t in header.graph.initializer
        if t.name in n.input
    )


def _count_sessions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the onnxruntime sessions the weight-quantizer evaluation creates (one list entry per session, holding
    its node count); starts from an empty cache."""
    import importlib

    fwq = importlib.import_module("ortquant.transforms.fold_weight_quantizers")
    fwq.clear_cache()
    calls: list[int] = []
    run = fwq._run_nodes

    def counting(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> list[onnx.TensorProto]:
        calls.append(len(nodes))
        return run(model, nodes)

    monkeypatch.setattr(fwq, "_run_nodes", counting)
    return calls


def test_integer_prepare_evaluates_all_weight_quantizers_in_one_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The integer lowering reads every weight quantizer, one layer at a time, and the fold after it the rest: one
    session in all, not one per layer (6 lowered layers here), and the same model as without the kept results."""
    m = onnx.load(str(MODELS / "cnn4c2f_w4a4.onnx"))
    calls = _count_sessions(monkeypatch)
    fast = ortquant.prepare_model(m, integer=True)
    assert calls == [6]  # the six weight quantizers (Conv x4, Gemm x2), evaluated together once
    assert sum(n.domain == "ortquant.integer" for n in unchain(fast)) == 6
    import importlib

    fwq = importlib.import_module("ortquant.transforms.fold_weight_quantizers")
    fwq.clear_cache()
    monkeypatch.setattr(fwq, "evaluate_nodes", fwq._run_nodes)  # the uncached evaluation, one session per request
    slow = ortquant.prepare_model(m, integer=True)
    assert len(calls) > 6
    assert fast.SerializeToString() == slow.SerializeToString()


def test_kept_results_follow_the_weights_not_the_model_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model changed in place and prepared again gets the new weights' quantized values (the kept results are
    keyed by the inputs' content), and a second prepare of an unchanged model reuses them."""
    m = _weight_quant_model()
    calls = _count_sessions(monkeypatch)
    first = {t.name: numpy_helper.to_array(t) for t in fold_weight_quantizers(m).graph.initializer}
    again = {t.name: numpy_helper.to_array(t) for t in fold_weight_quantizers(m).graph.initializer}
    assert len(calls) == 1 and np.array_equal(first["wq"], again["wq"])
    w = next(t for t in m.graph.initializer if t.name == "w")
    new_w = (numpy_helper.to_array(w) * 3).astype(np.float32)
    w.CopyFrom(numpy_helper.from_array(new_w, "w"))
    changed = {t.name: numpy_helper.to_array(t) for t in fold_weight_quantizers(m).graph.initializer}
    assert len(calls) == 2
    src = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    want = kernels.quant(new_w, src["ws"], src["wz"], src["wb"], True, True, "ROUND")
    assert np.array_equal(changed["wq"].view(np.uint32), want.view(np.uint32))
    assert not np.array_equal(changed["wq"], first["wq"])


def test_one_bad_quantizer_does_not_fail_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the batch cannot run (a quantizer's bit width is invalid), a request for another node is evaluated on
    its own; a request for the bad node fails naming it."""
    import importlib

    fwq = importlib.import_module("ortquant.transforms.fold_weight_quantizers")
    m = _weight_quant_model()
    bad = helper.make_node("Quant", ["v", "vs", "wz", "nb"], ["vq2"], name="bad_quant", domain=Q, signed=1)
    m.graph.initializer.append(numpy_helper.from_array(np.float32(0), "nb"))  # bit width 0: the op refuses it
    m.graph.node.insert(0, bad)
    m.graph.node.append(helper.make_node("MatMul", ["h", "vq2"], ["y2"], name="mm3"))
    m.graph.output.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, [2, 3]))
    calls = _count_sessions(monkeypatch)
    good = next(n for n in m.graph.node if n.name == "qw")
    (t,) = fwq.evaluate_nodes(m, [good])
    src = {x.name: numpy_helper.to_array(x) for x in m.graph.initializer}
    want = kernels.quant(src["w"], src["ws"], src["wz"], src["wb"], True, True, "ROUND")
    assert np.array_equal(numpy_helper.to_array(t), want)
    assert calls == [3, 1]  # the batch (qw, bq, bad_quant) failed, then qw alone
    with pytest.raises(Exception, match="bad_quant"):
        fwq.evaluate_nodes(m, [bad])
