"""The linger 1.1.1 conformance cases whose matrix ops are issue 4's (tests/data/linger, see its README): the
exported models through ortquant.InferenceSession give linger's own outputs with max abs diff 0.

Each case is also run with its thinker::Quant / thinker::Dequant nodes done in numpy from the spec (linger.md
section 0: q = clamp(floor(x * scale_x + 0.5)), y = q / scale_o), so the matrix ops are checked on their own;
one session runs several ops from 8 threads at once (bit-identical results)."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from matrix_util import int8_data, matrix_model
from onnx import helper

import ortquant
from conftest import NP_TO_ONNX, assert_bitexact, needs_onnx_python_inference, run_model
from ortquant.reference import linger_matrix as ref

DATA = Path(__file__).resolve().parent.parent / "data" / "linger"
CASES = [
    "linear_2d",
    "linear_3d_nobias",
    "bmm",
    "conv1d",
    "conv2d_depthwise_k1",
    "conv2d_dil_nobias",
    "conv2d_group_s2",
    "conv2d_k5_s4_obits16",
    "convtranspose_k4_nobias",
    "convtranspose_outpad",
]


def _attr(node: onnx.NodeProto, name: str):
    for a in node.attribute:
        if a.name == name:
            return helper.get_attribute_value(a)
    return None


def _quant(x: np.ndarray, scale: float, bits: int) -> np.ndarray:
    q = np.floor(x.astype(np.float32) * np.float32(scale) + np.float32(0.5))
    return np.clip(q, -(2 ** (bits - 1)), 2 ** (bits - 1) - 1).astype(np.int8)


def _load(case: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    model = onnx.load(str(DATA / f"{case}.onnx"))
    data = np.load(DATA / f"{case}.npz")
    feeds = {i.name: data[f"x{k}"] for k, i in enumerate(model.graph.input)}
    expected = [data[f"y{k}"] for k in range(len(model.graph.output))]
    return model, feeds, expected


def _without_quant_dequant(model: onnx.ModelProto, feeds: dict[str, np.ndarray], shapes: list[tuple[int, ...]]):
    """The model with Quant outputs as int8 graph inputs (computed here) and Dequant inputs as graph outputs."""
    g = model.graph
    new_feeds: dict[str, np.ndarray] = {}
    dequant: dict[str, tuple[str, float]] = {}  # graph output -> (int tensor, scale_o)
    nodes = []
    for n in g.node:
        if n.domain == "thinker" and n.op_type == "Quant":
            new_feeds[n.output[0]] = _quant(feeds[n.input[0]], _attr(n, "scale_x"), _attr(n, "data_bits") or 8)
        elif n.domain == "thinker" and n.op_type == "Dequant":
            dequant[n.output[0]] = (n.input[0], _attr(n, "scale_o"))
        else:
            nodes.append(n)
    inputs = [helper.make_tensor_value_info(k, onnx.TensorProto.INT8, list(v.shape)) for k, v in new_feeds.items()]
    producer = {out: n for n in nodes for out in n.output}
    outputs = []
    for o, shape in zip(g.output, shapes, strict=True):
        src = dequant[o.name][0]
        dtype = ref.out_dtype(_attr(producer[src], "o_bits"))
        outputs.append(helper.make_tensor_value_info(src, NP_TO_ONNX[dtype], list(shape)))
    sub = helper.make_graph(nodes, "sub", inputs, outputs, initializer=list(g.initializer))
    m = helper.make_model(sub, opset_imports=list(model.opset_import))
    m.ir_version = 10
    scales = [dequant[o.name][1] for o in g.output]
    return m, new_feeds, scales


@pytest.mark.parametrize("case", CASES)
def test_matrix_ops_reproduce_linger(case):
    model, feeds, expected = _load(case)
    sub, sub_feeds, scales = _without_quant_dequant(model, feeds, [y.shape for y in expected])
    outs = ortquant.InferenceSession(sub).run(None, sub_feeds)
    for got, scale, want in zip(outs, scales, expected, strict=True):
        y = got.astype(np.float32) / np.float32(scale)
        assert np.abs(y - want).max() == 0.0, case
        assert_bitexact(y, want)


def _has_quant_dequant() -> bool:
    ops = ortquant.supported_ops()
    return ("thinker", "Quant") in ops and ("thinker", "Dequant") in ops


@pytest.mark.skipif(not _has_quant_dequant(), reason="thinker::Quant/Dequant (issue 3) not registered in this build")
@pytest.mark.parametrize("case", CASES)
def test_exported_models_reproduce_linger(case):
    model, feeds, expected = _load(case)
    outs = ortquant.InferenceSession(model).run(None, feeds)
    for got, want in zip(outs, expected, strict=True):
        assert np.abs(got - want).max() == 0.0, case
        assert_bitexact(got, want)


def test_concurrent_runs_are_bit_identical(rng):
    # One session with LinearInt, Conv2dInt and BmmInt nodes, run from 8 threads x 200 times.
    x = int8_data(rng, (2, 8, 12, 12))
    w = int8_data(rng, (16, 8, 3, 3))
    b = rng.integers(-(2**12), 2**12, 16).astype(np.int32)
    attrs = dict(scale_x=16.0, scale_w=64.0, scale_o=8.0, o_bits=8, pads=[1, 1, 1, 1])
    conv_model, feeds = matrix_model("Conv2dInt", [x, w, b], attrs, const=[False, True, True])
    g = conv_model.graph
    lw = int8_data(rng, (12, 12))
    g.initializer.append(onnx.numpy_helper.from_array(lw, "lw"))
    g.node.append(
        helper.make_node(
            "LinearInt",
            ["out0", "lw"],
            ["lin"],
            domain="thinker",
            name="lin",
            scale_x=8.0,
            scale_w=128.0,
            scale_o=4.0,
            o_bits=8,
        )
    )
    g.node.append(
        helper.make_node("BmmInt", ["lin", "lin"], ["bmm"], domain="thinker", name="bmm", scale_x=4.0, scale_y=4.0)
    )
    g.output.append(helper.make_tensor_value_info("bmm", NP_TO_ONNX[np.dtype(np.float32)], None))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    sess = ortquant.InferenceSession(conv_model, sess_options=so)
    want = run_model(conv_model, feeds)
    bad: list[str] = []

    def worker() -> None:
        for _ in range(200):
            got = sess.run(None, feeds)
            if not all(np.array_equal(a, b) for a, b in zip(got, want, strict=True)):
                bad.append("mismatch")
                return

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


@needs_onnx_python_inference
@pytest.mark.parametrize("case", CASES)
def test_schemas_check_and_infer(case):
    # Without Quant/Dequant the graphs hold only issue-4 ops: the full checker accepts them and shape inference
    # gives the dtype and shape onnxruntime produces.
    model, feeds, expected = _load(case)
    sub, sub_feeds, _ = _without_quant_dequant(model, feeds, [y.shape for y in expected])
    onnx.checker.check_model(sub, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(sub, strict_mode=True)
    # Strip the declared output types: what inference says must match what onnxruntime computes.
    bare = onnx.ModelProto()
    bare.CopyFrom(sub)
    for o in bare.graph.output:
        o.type.tensor_type.ClearField("shape")
        o.type.tensor_type.elem_type = 0
    inferred = onnx.shape_inference.infer_shapes(bare)
    types = {v.name: v.type.tensor_type for v in inferred.graph.value_info}
    outs = ortquant.InferenceSession(sub).run(None, sub_feeds)
    for o, got in zip(sub.graph.output, outs, strict=True):
        t = (
            types[o.name]
            if o.name in types
            else next(x.type.tensor_type for x in inferred.graph.output if x.name == o.name)
        )
        assert t.elem_type == NP_TO_ONNX[got.dtype], case
        assert [d.dim_value for d in t.shape.dim] == list(got.shape), case
