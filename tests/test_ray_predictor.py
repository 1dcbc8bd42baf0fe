"""ortquant.ray.Predictor as a plain callable on dict-of-numpy batches (no Ray needed), and the promise that the
rest of the package never imports Ray. The test on a real Ray cluster is tests/ray/test_ray_cluster.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import IR_VERSION, assert_bitexact
from ortquant.ray import BatchError, Predictor

REPO = Path(__file__).resolve().parents[1]
CNN = REPO / "models" / "cnn_w4a4.onnx"


def test_ortquant_does_not_import_ray():
    code = (
        "import sys, numpy as np, ortquant, ortquant.cli, ortquant.ray\n"
        "s = ortquant.InferenceSession(sys.argv[1])\n"
        "s.run(None, {'global_in': np.zeros((2, 3, 32, 32), np.float32)})\n"
        "p = ortquant.ray.Predictor(sys.argv[1])\n"
        "p({'global_in': np.zeros((2, 3, 32, 32), np.float32)})\n"
        "bad = sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.'))\n"
        "print('RAY', bad)\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(CNN)], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert "RAY []" in r.stdout, r.stdout


def _single_process(x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    (y,) = ortquant.InferenceSession(CNN, sess_options=so).run(None, {"global_in": x})
    return y


def test_columns_in_outputs_out_others_pass_through(rng):
    x = rng.standard_normal((6, 3, 32, 32)).astype(np.float32)
    ids = np.arange(100, 106)
    names = np.array([f"row{i}" for i in range(6)], dtype=object)
    p = Predictor(str(CNN))
    assert p.threads == 1  # outside Ray: one intra-op thread, never onnxruntime's one-per-core default
    out = p({"global_in": x, "id": ids, "name": names})
    assert sorted(out) == ["global_out", "id", "name"]
    assert out["id"] is ids and out["name"] is names  # passed through untouched
    assert_bitexact(out["global_out"], _single_process(x))
    kept = Predictor(CNN, keep_inputs=True)({"global_in": x, "id": ids})
    assert sorted(kept) == ["global_in", "global_out", "id"] and kept["global_in"] is x
    s = p.stats()
    assert s["batches"] == 1 and s["rows"] == 6 and s["rows_per_s"] > 0


def test_model_as_bytes_and_file_uri(rng, tmp_path):
    x = rng.standard_normal((3, 3, 32, 32)).astype(np.float32)
    want = _single_process(x)
    assert_bitexact(Predictor(CNN.read_bytes())({"global_in": x})["global_out"], want)
    assert_bitexact(Predictor(CNN.as_uri())({"global_in": x})["global_out"], want)
    spaced = tmp_path / "a model dir" / "cnn w4a4.onnx"  # percent-encoded in the URI
    spaced.parent.mkdir()
    spaced.write_bytes(CNN.read_bytes())
    assert "%20" in spaced.as_uri()
    assert_bitexact(Predictor(spaced.as_uri())({"global_in": x})["global_out"], want)


def test_object_tensor_column_is_stacked(rng):
    x = rng.standard_normal((4, 3, 32, 32)).astype(np.float32)
    col = np.empty(4, dtype=object)
    for i in range(4):
        col[i] = x[i]
    assert_bitexact(Predictor(CNN)({"global_in": col})["global_out"], _single_process(x))


def test_missing_input_column_is_named():
    with pytest.raises(BatchError, match=r"no column\(s\) \['global_in'\].*columns \['image'\]"):
        Predictor(CNN)({"image": np.zeros((1, 3, 32, 32), np.float32)})


def test_unknown_output_and_bad_threads():
    with pytest.raises(ValueError, match="no output"):
        Predictor(CNN, outputs=["logits"])
    with pytest.raises(ValueError, match="threads"):
        Predictor(CNN, threads=0)


def test_output_name_colliding_with_a_column():
    with pytest.raises(BatchError, match="global_out"):
        Predictor(CNN)({"global_in": np.zeros((2, 3, 32, 32), np.float32), "global_out": np.zeros(2)})


def _bits_model(path: Path) -> str:
    """y = Quant(x, 0.25, 0, min(bits)) per batch: a batch whose `bits` column holds a 0 fails in the Quant node."""
    nodes = [
        helper.make_node("ReduceMin", ["bits"], ["bw"], keepdims=0, name="min_bits"),
        helper.make_node(
            "Quant", ["x", "scale", "zeropt", "bw"], ["y"], domain="qonnx.custom_op.general", name="batch_quant"
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "bits",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("bits", TensorProto.FLOAT, ["n"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        initializer=[
            numpy_helper.from_array(np.float32(0.25), "scale"),
            numpy_helper.from_array(np.float32(0), "zeropt"),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("qonnx.custom_op.general", 1)]
    )
    model.ir_version = IR_VERSION
    onnx.save(model, path)
    return str(path)


def test_a_failing_batch_names_the_batch_and_the_node(tmp_path, rng):
    p = Predictor(_bits_model(tmp_path / "bits.onnx"))
    x = rng.standard_normal((5, 4)).astype(np.float32)
    good = p({"x": x, "bits": np.full(5, 8, np.float32)})
    assert good["y"].shape == (5, 4)
    with pytest.raises(BatchError) as e:
        p({"x": x, "bits": np.array([8, 8, 0, 8, 8], np.float32)})
    msg = str(e.value)
    assert "batch 1 (rows 5..9" in msg and "batch_quant" in msg and "bitwidth" in msg, msg
    # the worker goes on with the next batch
    assert p({"x": x, "bits": np.full(5, 4, np.float32)})["y"].shape == (5, 4)


# ---- models with a fixed batch dimension ------------------------------------------------------------------


def _fixed_batch_cnn(path: Path) -> str:
    """models/cnn_w4a4.onnx as QONNX exports write it: batch 1 fixed on the inputs, outputs and the Reshape."""
    model = onnx.load(CNN)
    for vi in [*model.graph.input, *model.graph.output]:
        vi.type.tensor_type.shape.dim[0].dim_value = 1
    (reshape,) = [n for n in model.graph.node if n.op_type == "Reshape"]
    for t in model.graph.initializer:
        if t.name == reshape.input[1]:
            t.CopyFrom(numpy_helper.from_array(np.array([1, 512], np.int64), t.name))
    onnx.save(model, path)
    return str(path)


def _not_rebatchable(path: Path) -> str:
    """x [1, 12] -> Reshape [3, 4] -> Relu -> Reshape [1, 12]: one row per run only."""
    graph = helper.make_graph(
        [
            helper.make_node("Reshape", ["x", "s34"], ["m"], name="to_3x4"),
            helper.make_node("Relu", ["m"], ["r"]),
            helper.make_node("Reshape", ["r", "s112"], ["y"], name="back"),
        ],
        "rows",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])],
        initializer=[
            numpy_helper.from_array(np.array([3, 4], np.int64), "s34"),
            numpy_helper.from_array(np.array([1, 12], np.int64), "s112"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    onnx.save(model, path)
    return str(path)


def test_fixed_batch_model_is_rebatched_and_says_so(tmp_path, rng, caplog):
    path = _fixed_batch_cnn(tmp_path / "fixed.onnx")
    x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    with pytest.raises(Exception, match="Got: 8 Expected: 1"):
        ortquant.InferenceSession(path).run(None, {"global_in": x})  # what the Predictor used to hit
    with caplog.at_level("INFO", logger="ortquant.ray"):
        p = Predictor(path)
    assert p.batch_mode == "rebatched"
    assert "fixed batch of 1; its batch dimension was made dynamic" in caplog.text
    s = ortquant.InferenceSession(path)
    want = np.concatenate([s.run(None, {"global_in": x[i : i + 1]})[0] for i in range(8)])
    assert_bitexact(p({"global_in": x})["global_out"], want)
    assert_bitexact(p({"global_in": x[:3]})["global_out"], want[:3])  # a short last batch too
    assert Predictor(CNN).batch_mode == "as exported"


def test_fixed_batch_model_that_cannot_be_rebatched_runs_row_by_row(tmp_path, rng, caplog):
    path = _not_rebatchable(tmp_path / "rows.onnx")
    x = rng.standard_normal((5, 12)).astype(np.float32)
    with caplog.at_level("WARNING", logger="ortquant.ray"):
        p = Predictor(path)
    assert p.batch_mode == "rows" and p.rows_per_run == 1
    assert "cannot be made dynamic" in caplog.text and "to_3x4" in caplog.text and "1 row(s) at a time" in caplog.text
    out = p({"x": x, "id": np.arange(5)})
    assert_bitexact(out["y"], np.maximum(x, 0))
    assert out["id"].tolist() == [0, 1, 2, 3, 4]
