"""fix_legacy_domains: QONNX ops in the default domain, the 2019-2020 ``finn`` domain, and custom domains missing
from opset_import, compared bit for bit with qonnx 1.0.0's execute_onnx, through ortquant.InferenceSession and
through ``ortquant prepare`` + a plain onnxruntime session."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _oracle import IR_VERSION, ort_with_library, qonnx_run
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import ORT_ERRORS, assert_bitexact
from ortquant.cli import main
from ortquant.transforms.legacy_domains import fix_legacy_domains

GENERAL = "qonnx.custom_op.general"


def _quant_relu_model(domain: str, opsets: list[tuple[str, int]]) -> onnx.ModelProto:
    """Old Brevitas/FINN layout: Quant -> Relu -> MultiThreshold -> BipolarQuant, QONNX nodes in ``domain``."""
    inits = [
        numpy_helper.from_array(np.array(0.125, np.float32), "s"),
        numpy_helper.from_array(np.array(0.0, np.float32), "z"),
        numpy_helper.from_array(np.array(4.0, np.float32), "bw"),
        numpy_helper.from_array(np.sort(np.linspace(-1, 1, 6, dtype=np.float32).reshape(1, 6), axis=1), "thr"),
        numpy_helper.from_array(np.array(0.5, np.float32), "sb"),
    ]
    nodes = [
        helper.make_node(
            "Quant",
            ["x", "s", "z", "bw"],
            ["q"],
            name="quant0",
            domain=domain,
            signed=1,
            narrow=0,
            rounding_mode="ROUND",
        ),
        helper.make_node("Relu", ["q"], ["r"], name="relu0"),
        helper.make_node(
            "MultiThreshold",
            ["r", "thr"],
            ["t"],
            name="mt0",
            domain=domain,
            out_dtype="UINT3",
            out_scale=0.25,
            out_bias=-0.5,
            data_layout="NCHW",
        ),
        helper.make_node("BipolarQuant", ["t", "sb"], ["y"], name="bip0", domain=domain),
    ]
    graph = helper.make_graph(
        nodes,
        "legacy",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 4])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])
    model.ir_version = IR_VERSION
    return model


def _as_general(model: onnx.ModelProto) -> onnx.ModelProto:
    """What qonnx means by the legacy model: the same nodes in qonnx.custom_op.general."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        if n.op_type in ("Quant", "MultiThreshold", "BipolarQuant"):
            n.domain = GENERAL
    return m


CASES = {
    "default_domain_opset9": ("", [("", 9)]),
    "default_domain_opset11": ("", [("", 11)]),
    "finn_imported": ("finn", [("", 11), ("finn", 1)]),
    "finn_not_imported": ("finn", [("", 11)]),
    "qonnx_imported": ("qonnx", [("", 11), ("qonnx", 1)]),  # files older qonnx releases wrote
    "qonnx_not_imported": ("qonnx", [("", 11)]),
    "general_not_imported": (GENERAL, [("", 13)]),
    "brevitas_not_imported": ("onnx.brevitas", [("", 11)]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_legacy_model_matches_qonnx(case, tmp_path):
    domain, opsets = CASES[case]
    model = _quant_relu_model(domain, opsets)
    x = (np.random.default_rng(1).standard_normal((2, 3, 4, 4)) * 2).astype(np.float32)
    want = qonnx_run(_as_general(model), {"x": x})["y"]
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    if domain in ("", "finn", "qonnx"):  # as published, plain onnxruntime with the library cannot load it
        with pytest.raises(ORT_ERRORS):
            ort_with_library(str(path), {"x": x})
    got = ortquant.InferenceSession(str(path)).run(None, {"x": x})[0]
    assert_bitexact(got, want)
    out = tmp_path / "out.onnx"
    assert main(["prepare", str(path), str(out)]) == 0
    assert_bitexact(ort_with_library(str(out), {"x": x})[0], want)


def test_finn_domain_runs_in_qonnx_itself():
    """qonnx's ModelWrapper renames ``finn`` to qonnx.custom_op.general: the published file is the oracle input."""
    model = _quant_relu_model("finn", [("", 11), ("finn", 1)])
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 4)).astype(np.float32)
    assert_bitexact(ortquant.InferenceSession(model).run(None, {"x": x})[0], qonnx_run(model, {"x": x})["y"])


def test_standard_ops_and_supported_models_are_untouched():
    model = _quant_relu_model(GENERAL, [("", 13), (GENERAL, 1)])
    assert fix_legacy_domains(model) is model
    # onnxruntime accepts a registered custom domain without an opset import: no rewrite (and no copy) there
    for m in (_quant_relu_model(GENERAL, [("", 13)]), _quant_relu_model("onnx.brevitas", [("", 11)])):
        assert fix_legacy_domains(m) is m
    conv = helper.make_node("Conv", ["x", "w"], ["y"], name="c")
    assert not __import__("ortquant.transforms.legacy_domains", fromlist=["x"])._takes_default_domain_node(conv)


def test_finn_fpgadataflow_nodes_are_not_taken():
    node = helper.make_node("MultiThreshold", ["x", "t"], ["y"], domain="finn", backend="fpgadataflow")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11), helper.make_opsetid("finn", 1)])
    assert fix_legacy_domains(model) is model


def test_default_domain_trunc_v2_gets_opset_2():
    node = helper.make_node("Trunc", ["x", "s", "z", "bi", "so", "bo"], ["y"], name="t", rounding_mode="FLOOR")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    out = fix_legacy_domains(model)
    assert out.graph.node[0].domain == GENERAL
    assert {(i.domain, i.version) for i in out.opset_import} == {("", 11), (GENERAL, 2)}
    assert model.graph.node[0].domain == ""  # input untouched
