"""InferenceSession(path) with external data: the path goes to onnxruntime unchanged when no rewrite is needed,
and a rewritten graph reads its external data from the model's folder."""

from __future__ import annotations

from unittest import mock

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant import _session

GENERAL = "qonnx.custom_op.general"


def _model(domain: str) -> onnx.ModelProto:
    w = (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) - 1000) / 512
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array(0.25, np.float32), "s"),
        numpy_helper.from_array(np.array(0.0, np.float32), "z"),
        numpy_helper.from_array(np.array(4.0, np.float32), "bw"),
    ]
    nodes = [
        helper.make_node("Quant", ["w", "s", "z", "bw"], ["wq"], name="qw", domain=domain, signed=1, narrow=0),
        helper.make_node("MatMul", ["x", "wq"], ["y"], name="mm"),
    ]
    graph = helper.make_graph(
        nodes,
        "ext",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 32])],
        inits,
    )
    imports = [helper.make_opsetid("", 13)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=imports)
    model.ir_version = 10
    return model


def _expected(x: np.ndarray) -> np.ndarray:
    w = (np.arange(64 * 32, dtype=np.float32).reshape(64, 32) - 1000) / 512
    wq = np.clip(np.round(w / np.float32(0.25)), -8, 7) * np.float32(0.25)
    return x @ wq


def test_unchanged_model_is_passed_by_path(tmp_path, monkeypatch):
    model = _model(GENERAL)
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, location="m.data", size_threshold=0)
    import onnxruntime as ort

    seen = []
    real = ort.InferenceSession

    def spy(arg, *a, **kw):
        seen.append(arg)
        return real(arg, *a, **kw)

    with mock.patch.object(ort, "InferenceSession", spy):
        sess = ortquant.InferenceSession(str(path))
    assert seen == [str(path)]  # the path itself: no protobuf string
    x = np.ones((2, 64), np.float32)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _expected(x), rtol=1e-6)


def test_rewritten_model_reads_external_data_from_its_folder(tmp_path, monkeypatch):
    model = _model("")  # default-domain Quant: fix_legacy_domains rewrites it
    model.opset_import[0].version = 11
    sub = tmp_path / "models"
    sub.mkdir()
    onnx.save(model, sub / "m.onnx", save_as_external_data=True, location="weights.bin", size_threshold=0)
    monkeypatch.chdir(tmp_path)  # the data is not in the working directory
    header = onnx.load(sub / "m.onnx", load_external_data=False)
    assert _session.uses_external_data(header)
    sess = ortquant.InferenceSession(str(sub / "m.onnx"))
    x = np.linspace(-1, 1, 128, dtype=np.float32).reshape(2, 64)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], _expected(x), rtol=1e-6)
