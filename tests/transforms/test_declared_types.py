"""fix_declared_types: linger exports made with torch 2.x declare float value_info for custom-op outputs.

Fixtures: the linger 1.1.1 conformance models (tests/data/linger, with linger's own outputs) with such wrong
declarations injected the way the torch-2 TorchScript exporter writes them: every intermediate value (custom-op
outputs and the standard ops that pass int8 on) declared tensor(float). Each must load and match linger bit for
bit, through ortquant.InferenceSession and through ``ortquant prepare`` + a plain onnxruntime session.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from _oracle import ort_with_library
from onnx import TensorProto, helper

import ortquant
from conftest import ORT_ERRORS, assert_bitexact, subprocess_env
from ortquant.cli import main
from ortquant.transforms.declared_types import contradictions, fix_declared_types

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "linger"))
from linger_util import DATA

CASES = ["linear_2d", "conv2d_group_s2", "relu_int8", "maxpool_int8", "iqadd", "lstm_len_bf", "gru_tf", "conv_bn",
         "iqcat2", "bmm"]  # fmt: skip


def _inject_float_value_info(model: onnx.ModelProto) -> onnx.ModelProto:
    out = onnx.ModelProto()
    out.CopyFrom(model)
    del out.graph.value_info[:]
    io = {v.name for v in [*out.graph.input, *out.graph.output]} | {t.name for t in out.graph.initializer}
    for node in out.graph.node:
        if node.op_type == "Constant":
            continue
        for o in node.output:
            if o and o not in io:
                out.graph.value_info.append(helper.make_tensor_value_info(o, TensorProto.FLOAT, None))
    return out


def _feeds(case: str, model: onnx.ModelProto) -> tuple[dict[str, np.ndarray], list[np.ndarray]]:
    data = np.load(DATA / f"{case}.npz")
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    feeds = {n: data[f"x{k}"] for k, n in enumerate(names)}
    outs = [data[f"y{k}"] for k in range(len(model.graph.output))]
    return feeds, outs


@pytest.mark.parametrize("case", CASES)
def test_torch2_declarations_are_corrected(case, tmp_path):
    model = _inject_float_value_info(onnx.load(str(DATA / f"{case}.onnx")))
    found = contradictions(model)
    assert found, "the fixture must contradict at least one declaration"
    feeds, want = _feeds(case, model)
    path = tmp_path / f"{case}.onnx"
    onnx.save(model, path)
    with pytest.raises(ORT_ERRORS):  # as published, plain onnxruntime refuses the declared types
        ort_with_library(str(path), feeds)
    got = ortquant.InferenceSession(str(path)).run(None, feeds)
    for g, w in zip(got, want, strict=True):
        if w.dtype != g.dtype:  # LSTM/GRU state outputs
            w = w.astype(g.dtype)
        assert_bitexact(g, w)
    out = tmp_path / f"{case}_prepared.onnx"
    assert main(["prepare", str(path), str(out)]) == 0
    for g, w in zip(ort_with_library(str(out), feeds), got, strict=True):
        assert_bitexact(g, w)


def test_correct_declarations_are_kept():
    model = onnx.load(str(DATA / "linear_2d.onnx"))
    model = onnx.shape_inference.infer_shapes(model)  # declarations that agree with the ops
    assert fix_declared_types(model) is model


def test_wrong_graph_output_of_custom_op_is_corrected():
    model = onnx.load(str(DATA / "linear_2d.onnx"))
    # drop the final Dequant: the graph output is now LinearInt's int8 output, declared float by the exporter bug
    deq = model.graph.node[-1]
    assert deq.op_type == "Dequant"
    produced = deq.input[0]
    del model.graph.node[-1]
    model.graph.output[0].name = produced
    out = fix_declared_types(model)
    assert out.graph.output[0].type.tensor_type.elem_type == TensorProto.INT8
    feeds, _ = _feeds("linear_2d", model)
    (y,) = ortquant.InferenceSession(model).run(None, feeds)
    assert y.dtype == np.int8


@pytest.mark.parametrize("case", ["linear_2d", "conv_bn", "lstm_len_bf"])
def test_torch2_exports_load_in_a_fresh_process(case, tmp_path):
    """A user's process has registered nothing (no ONNX schemas): the rewrite must still find the contradictions."""
    import json
    import subprocess

    model = _inject_float_value_info(onnx.load(str(DATA / f"{case}.onnx")))
    feeds, want = _feeds(case, model)
    path = tmp_path / f"{case}.onnx"
    onnx.save(model, path)
    np.savez(tmp_path / "feeds.npz", **feeds)
    code = (
        "import json, sys, numpy as np, ortquant\n"
        f"f = np.load({str(tmp_path / 'feeds.npz')!r})\n"
        f"outs = ortquant.InferenceSession({str(path)!r}).run(None, {{k: f[k] for k in f.files}})\n"
        f"np.savez({str(tmp_path / 'outs.npz')!r}, *outs)\n"
        "print(json.dumps(len(outs)))\n"
    )
    env = subprocess_env()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-1500:]
    got = np.load(tmp_path / "outs.npz")
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == len(want)
    for k, w in enumerate(want):
        g = got[f"arr_{k}"]
        assert_bitexact(g, w.astype(g.dtype) if w.dtype != g.dtype else w)


def _stale_rank_model(import_domain: bool) -> onnx.ModelProto:
    """Quant(x) -> MatMul(Quant(w)) -> Add(b) whose graph input is 3-D but whose value_info still declares the
    2-D values of the file before its input was edited; ``import_domain``: the QONNX domain in opset_import (the
    QKeras converter's files lack it)."""
    q = "qonnx.custom_op.general"
    rng = np.random.default_rng(0)
    inits = [
        helper.make_tensor("s", TensorProto.FLOAT, [], [0.05]), helper.make_tensor("z", TensorProto.FLOAT, [], [0.0]),
        helper.make_tensor("bits", TensorProto.FLOAT, [], [8.0]),
        helper.make_tensor("w", TensorProto.FLOAT, [6, 4], rng.standard_normal(24).astype(np.float32).tolist()),
        helper.make_tensor("b", TensorProto.FLOAT, [4], [0.5, -0.5, 1.0, 0.0]),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Quant", ["x", "s", "z", "bits"], ["xq"], domain=q, signed=1),
        helper.make_node("Quant", ["w", "s", "z", "bits"], ["wq"], domain=q, signed=1),
        helper.make_node("MatMul", ["xq", "wq"], ["y"]),
        helper.make_node("Add", ["y", "b"], ["out"]),
    ]
    stale = [helper.make_tensor_value_info(n, TensorProto.FLOAT, d) for n, d in (("xq", [1, 6]), ("y", [1, 4]))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 1, 6])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], initializer=inits,
                          value_info=stale)  # fmt: skip
    imports = [helper.make_opsetid("", 17), *([helper.make_opsetid(q, 1)] if import_domain else [])]
    m = helper.make_model(g, opset_imports=imports)
    m.ir_version = 10
    return m


@pytest.mark.parametrize("import_domain", [True, False])
def test_declarations_of_a_stale_rank_are_dropped(import_domain):
    # onnxruntime's MatMul + Add fusion trusts the 2-D declarations, makes a Gemm and fails at run time on the 3-D
    # values; without them it infers the shapes itself and runs the MatMul and the Add.
    m = _stale_rank_model(import_domain)
    fixed = fix_declared_types(m)
    assert [v.name for v in fixed.graph.value_info] == []
    x = np.random.default_rng(1).standard_normal((2, 1, 6)).astype(np.float32)
    got = ortquant.InferenceSession(m).run(None, {"x": x})[0]
    assert got.shape == (2, 1, 4)
    ref = ortquant.InferenceSession(fixed, exact=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


def test_declarations_of_the_right_rank_are_kept():
    m = _stale_rank_model(True)
    m.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6]))
    assert fix_declared_types(m) is m
