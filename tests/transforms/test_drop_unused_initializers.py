"""The last pipeline step (``transforms/drop_unused_initializers.py``): initializers nothing reads are dropped, the
ones a node (of a subgraph too), a graph output or a graph input names are kept; and a model whose fusions leave
such initializers loads through ``ortquant.InferenceSession`` without onnxruntime's warning about them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ortquant.transforms.drop_unused_initializers import drop_unused_initializers

ROOT = Path(__file__).resolve().parents[2]


def _init(name: str) -> onnx.TensorProto:
    return numpy_helper.from_array(np.ones(2, np.float32), name)


def _model() -> onnx.ModelProto:
    then = helper.make_graph(
        [helper.make_node("Add", ["x", "sub"], ["t"])], "then", [], [helper.make_tensor_value_info("t", 1, [2])]
    )
    other = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", 1, [2])]
    )
    nodes = [
        helper.make_node("Add", ["x", "used"], ["a"]),
        helper.make_node("ReduceMax", ["a"], ["m"], keepdims=0),
        helper.make_node("Greater", ["m", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("dflt", 1, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("out", 1, [2])],
        initializer=[
            _init("used"), _init("sub"), _init("out"), _init("dflt"), _init("dead"), _init("dead2"),
            numpy_helper.from_array(np.float32(0), "zero"),
        ],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return m


def test_only_unread_initializers_go():
    m = _model()
    out = drop_unused_initializers(m)
    assert [t.name for t in out.graph.initializer] == ["used", "sub", "out", "dflt", "zero"]
    assert len(m.graph.initializer) == 7  # the input model is not modified
    assert drop_unused_initializers(out) is out


def test_a_prepared_model_loads_without_unused_initializer_warnings():
    """cnn_w4a4 in integer mode: its activation quantizers' parameters and the Reshape's shape are left unread by the
    code-flow and flatten fusions. onnxruntime's warnings go to stderr of the process that creates the session."""
    code = (
        "import ortquant\n"
        f"ortquant.InferenceSession({str(ROOT / 'models' / 'cnn_w4a4.onnx')!r}, integer=True)\n"
        "print('loaded')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0 and "loaded" in r.stdout, r.stderr
    assert "Removing initializer" not in r.stderr, r.stderr
