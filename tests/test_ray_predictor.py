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
