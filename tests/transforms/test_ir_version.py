"""fit_ir_version: a model stamped with an IR version onnxruntime does not read (onnx 1.23's default, 14) but using
nothing of it gets the oldest IR version that holds what it uses; the public API then loads the file as written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import subprocess_env
from ortquant.transforms.ir_version import NEWEST_READ, fit_ir_version, needed_ir_version

Q = "qonnx.custom_op.general"
ROOT = Path(__file__).resolve().parents[2]


def _model(ir: int, extra_nodes: list[onnx.NodeProto] | None = None) -> onnx.ModelProto:
    """x -> Quant(4-bit) -> y, stamped with IR version ``ir`` (onnx 1.23's make_model stamps 14)."""
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in (("s", 0.5), ("z", 0.0), ("b", 4.0))]
    nodes = [helper.make_node("Quant", ["x", "s", "z", "b"], ["y"], domain=Q, signed=1, narrow=0,
                              rounding_mode="ROUND"), *(extra_nodes or [])]  # fmt: skip
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    g = helper.make_graph(nodes, "g", [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(Q, 1)])
    m.ir_version = ir
    return m


def test_a_model_using_nothing_newer_gets_ir_10():
    m = _model(14)
    out = fit_ir_version(m)
    assert out.ir_version == 10 and m.ir_version == 14  # a copy: the input is not modified
    assert out.graph == m.graph


@pytest.mark.parametrize("ir", [7, 10, 11, NEWEST_READ])
def test_versions_onnxruntime_reads_are_left_alone(ir):
    m = _model(ir)
    assert fit_ir_version(m) is m


@pytest.mark.parametrize(
    ("elem", "needed"),
    [(TensorProto.FLOAT4E2M1, 11), (TensorProto.FLOAT8E8M0, 12), (TensorProto.INT2, 13), (TensorProto.UINT2, 13),
     (TensorProto.FLOAT6E2M3, 14), (TensorProto.FLOAT8E4M3FN, 10), (TensorProto.INT4, 10)],
)  # fmt: skip
def test_the_newest_element_type_used_decides(elem, needed):
    """An element type found as a Cast target, a Constant's tensor or a declared value type (each once)."""
    cast = _model(14, [helper.make_node("Cast", ["y"], ["c"], to=elem)])
    const = _model(14, [helper.make_node("Constant", [], ["k"], value=helper.make_tensor("t", elem, [0], []))])
    declared = _model(14)
    declared.graph.value_info.append(helper.make_tensor_value_info("v", elem, [1]))
    for m in (cast, const, declared):
        assert needed_ir_version(m) == needed, m.graph
        out = fit_ir_version(m)
        if needed > NEWEST_READ:
            assert out is m  # onnxruntime then says what it refuses
        else:
            assert out.ir_version == needed


def test_types_inside_subgraphs_and_sequences_count():
    body = helper.make_graph([helper.make_node("Cast", ["a"], ["b"], to=TensorProto.INT2)], "body",
                             [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
                             [helper.make_tensor_value_info("b", TensorProto.INT2, [1])])  # fmt: skip
    m = _model(14, [helper.make_node("If", ["cond"], ["r"], then_branch=body, else_branch=body)])
    assert needed_ir_version(m) == 13
    seq = _model(14)
    seq.graph.value_info.append(helper.make_tensor_sequence_value_info("sq", TensorProto.FLOAT8E8M0, [1]))
    assert needed_ir_version(seq) == 12


def test_multi_device_fields_are_left_alone():
    m = _model(14)
    m.graph.node[0].device_configurations.add().configuration_id = "d"
    assert needed_ir_version(m) == 11
    m2 = _model(14)
    m2.configuration.add().name = "d"
    assert fit_ir_version(m2) is m2


def test_public_api_loads_an_ir_14_file_in_a_fresh_process(tmp_path):
    path = tmp_path / "ir14.onnx"
    onnx.save(_model(14), path)
    code = (
        "import numpy as np, ortquant\n"
        "x = np.linspace(-4, 4, 6, dtype=np.float32).reshape(2, 3)\n"
        "for kw in ({}, {'exact': True}, {'integer': True}):\n"
        f"    y = ortquant.InferenceSession({str(path)!r}, **kw).run(None, {{'x': x}})[0]\n"
        "    assert np.array_equal(y, np.clip(np.round(x / 0.5), -8, 7) * 0.5), (kw, y)\n"
        "print('ok')\n"
    )
    env = subprocess_env()
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stdout + proc.stderr
    # ortquant prepare writes the file onnxruntime reads, and check says what changed
    out = tmp_path / "prepared.onnx"
    proc = subprocess.run([sys.executable, "-m", "ortquant", "prepare", str(path), str(out)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert onnx.load(out).ir_version == 10
    proc = subprocess.run([sys.executable, "-m", "ortquant", "check", str(path)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert "rewrite fit_ir_version:\n    IR version 14 -> 10" in proc.stdout, proc.stdout
