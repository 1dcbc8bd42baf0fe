"""constant_initializers: weights listed as graph inputs (torch's keep_initializers_as_inputs, FINN) become plain
constants by default; ``overridable_initializers=True`` keeps them. Model-level checks run in a fresh process
through the public API, on published files of the real-world corpus that list their weights as inputs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import subprocess_env
from ortquant.transforms import PrepareOptions, apply_pipeline
from ortquant.transforms.initializer_inputs import constant_initializers, initializer_inputs

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "conformance" / "realworld"


def _model(weights_as_inputs: bool) -> onnx.ModelProto:
    w = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array(0.25, np.float32), "s"),
        numpy_helper.from_array(np.array(0.0, np.float32), "z"),
        numpy_helper.from_array(np.array(4.0, np.float32), "b"),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])]
    if weights_as_inputs:
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    nodes = [
        helper.make_node("Quant", ["w", "s", "z", "b"], ["wq"], domain="qonnx.custom_op.general", signed=1),
        helper.make_node("MatMul", ["x", "wq"], ["y"]),
    ]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    )
    m.ir_version = 10
    return m


def test_drops_only_inputs_that_are_initializers():
    m = _model(True)
    assert initializer_inputs(m) == ["w", "s", "z", "b"]
    out = constant_initializers(m)
    assert [i.name for i in out.graph.input] == ["x"]
    assert [t.name for t in out.graph.initializer] == ["w", "s", "z", "b"]
    assert [i.name for i in m.graph.input] == ["x", "w", "s", "z", "b"]  # the input model is not changed


def test_nothing_to_do_returns_the_same_object():
    m = _model(False)
    assert constant_initializers(m) is m


def test_pipeline_default_folds_weight_quantizers_of_input_listed_weights():
    prepared, changed = apply_pipeline(_model(True), PrepareOptions())
    assert changed[0] == "constant_initializers"
    assert "fold_weight_quantizers" in changed
    assert not any(n.op_type == "Quant" for n in prepared.graph.node)


def test_overridable_initializers_keeps_the_model_as_published():
    m = _model(True)
    prepared, changed = apply_pipeline(m, PrepareOptions(overridable_initializers=True))
    assert "constant_initializers" not in changed
    assert [i.name for i in prepared.graph.input] == ["x", "w", "s", "z", "b"]
    assert any(n.op_type == "Quant" for n in prepared.graph.node)  # a fed weight must still be quantized


def _fresh(code: str) -> dict:
    env = subprocess_env()
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not (CORPUS / "radioml_vgg10_w8a8.onnx").is_file(), reason="real-world corpus not present")
@pytest.mark.parametrize("name", ["radioml_vgg10_w8a8", "zoo_tfc_2w2a", "qonnx_espcn_subpixel_w4a4"])
def test_published_files_get_constant_weights_in_a_fresh_process(name):
    """In a user's process: the session's inputs are the model's data inputs only, and integer mode lowers layers
    (with the weights left as inputs it refused every one: "not a constant initializer")."""
    res = _fresh(
        f"""
        import json, warnings, onnx, ortquant
        from ortquant.transforms import apply_pipeline, PrepareOptions
        path = {str(CORPUS / (name + ".onnx"))!r}
        published = [i.name for i in onnx.load(path).graph.input]
        sess = ortquant.InferenceSession(path)
        kept = ortquant.InferenceSession(path, overridable_initializers=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, _ = apply_pipeline(onnx.load(path), PrepareOptions(integer=True))
        lowered = sum(n.domain == "ortquant.integer" for n in model.graph.node)
        print(json.dumps({{"published": published, "inputs": [i.name for i in sess.get_inputs()],
                          "overridable": [i.name for i in sess.get_overridable_initializers()],
                          "kept": [i.name for i in kept.get_inputs() + kept.get_overridable_initializers()],
                          "lowered": lowered}}))
        """
    )
    assert len(res["published"]) > 1 and len(res["inputs"]) == 1 and res["overridable"] == []
    assert sorted(res["kept"]) == sorted(res["published"])
    if name == "qonnx_espcn_subpixel_w4a4":  # its 2-D convolutions; the others' layers wait for other rules
        assert res["lowered"] > 0, res
