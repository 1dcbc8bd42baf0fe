"""rewrite_int_maxpool_pads: linger's ceil-mode MaxPool (end pads >= kernel) on int8, with thinker's window
semantics (padded positions never win), checked against an independent numpy window loop and, on the unmodified
conformance model, against linger's own output.

Fixture: tests/data/linger/maxpool_int8.onnx (linger 1.1.1: Quant -> Conv2dInt -> MaxPool -> Dequant) with the
MaxPool's kernel/strides/pads replaced by the forms linger writes for ceil_mode=True with large strides.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _oracle import ort_with_library
from onnx import helper

import ortquant
from conftest import ORT_ERRORS, assert_bitexact
from ortquant.cli import main
from ortquant.transforms.int_maxpool_pads import rewrite_int_maxpool_pads

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "linger"))
from linger_util import DATA


def _window_max(q: np.ndarray, kernel, strides, pads) -> np.ndarray:
    """Max over each window's input positions only (thinker: padding never wins)."""
    n, c, h, w = q.shape
    kh, kw = kernel
    sh, sw = strides
    top, left, bottom, right = pads
    oh = (h + top + bottom - kh) // sh + 1
    ow = (w + left + right - kw) // sw + 1
    y = np.full((n, c, oh, ow), -128, np.int8)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - top, j * sw - left
            rs = slice(max(r0, 0), min(r0 + kh, h))
            cs = slice(max(c0, 0), min(c0 + kw, w))
            if rs.start < rs.stop and cs.start < cs.stop:
                y[:, :, i, j] = q[:, :, rs, cs].max(axis=(2, 3))
    return y


def _with_pool(kernel, strides, pads) -> onnx.ModelProto:
    model = onnx.load(str(DATA / "maxpool_int8.onnx"))
    pool = next(n for n in model.graph.node if n.op_type == "MaxPool")
    del pool.attribute[:]
    pool.attribute.extend(
        [
            helper.make_attribute("kernel_shape", list(kernel)),
            helper.make_attribute("strides", list(strides)),
            helper.make_attribute("pads", list(pads)),
        ]
    )
    for out in model.graph.output:
        out.type.tensor_type.ClearField("shape")
    return model


def _int8_before_pool(model: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    pool = next(n for n in model.graph.node if n.op_type == "MaxPool")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info(pool.input[0], onnx.TensorProto.INT8, None))
    return ortquant.InferenceSession(m).run(None, {m.graph.input[0].name: x})[0]


GEOMETRIES = [
    ((2, 3), (2, 3), (0, 1, 1, 3)),  # the example: end pads reach the kernel
    ((3, 3), (3, 3), (1, 1, 3, 3)),
    ((2, 2), (2, 2), (0, 0, 2, 2)),
    ((3, 2), (1, 2), (0, 0, 3, 2)),
]


@pytest.mark.parametrize("kernel,strides,pads", GEOMETRIES)
def test_ceil_mode_maxpool_matches_window_semantics(kernel, strides, pads, tmp_path):
    model = _with_pool(kernel, strides, pads)
    data = np.load(DATA / "maxpool_int8.npz")
    x = data["x0"]
    path = tmp_path / "pool.onnx"
    onnx.save(model, path)
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    with pytest.raises(ORT_ERRORS, match=r"[Pp]ad"):
        ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    q = _int8_before_pool(model, x)
    deq = next(n for n in model.graph.node if n.op_type == "Dequant")
    scale = next(a.f for a in deq.attribute if a.name == "scale_o")
    want = (_window_max(q, kernel, strides, pads).astype(np.float32) / np.float32(scale)).astype(np.float32)
    got = ortquant.InferenceSession(str(path)).run(None, {"x0": x})[0]
    assert_bitexact(got, want)
    out = tmp_path / "prepared.onnx"
    assert main(["prepare", str(path), str(out)]) == 0
    assert_bitexact(ort_with_library(str(out), {"x0": x})[0], want)


def test_conformance_maxpool_needs_no_rewrite():
    for case in ("maxpool_int8", "maxpool_int8_ceil"):
        model = onnx.load(str(DATA / f"{case}.onnx"))
        assert rewrite_int_maxpool_pads(model) is model
        data = np.load(DATA / f"{case}.npz")
        assert_bitexact(ortquant.InferenceSession(model).run(None, {"x0": data["x0"]})[0], data["y0"])


def test_float_maxpool_is_left_alone():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[0, 0, 2, 2], strides=[2, 2])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    assert rewrite_int_maxpool_pads(model) is model


def _float_pool(**attrs: object) -> onnx.ModelProto:
    node = helper.make_node("MaxPool", ["x"], ["y"], name="pool")
    node.attribute.extend(helper.make_attribute(k, v) for k, v in attrs.items())
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    return model


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": 2, "pads": [0, 0, 2, 2]},  # an INT, not INTS
        {"kernel_shape": [2, 2], "pads": 2},
        {"kernel_shape": [2, 2], "pads": [0, 0, 2, 2], "dilations": 1},
        {"kernel_shape": [2, 2], "pads": [0, 0, 2, 2], "auto_pad": b"\xff"},
        {"kernel_shape": "2", "pads": [0, 0, 2, 2]},
    ],
)
def test_malformed_maxpool_is_left_for_onnxruntime_to_refuse(attrs):
    """A MaxPool whose attributes the rewrite does not understand is not its business: it stays as it is, and
    onnxruntime refuses it in both modes, naming it (before, `list(2)` raised a TypeError for every model with such
    a node)."""
    model = _float_pool(**attrs)
    assert rewrite_int_maxpool_pads(model) is model
    for integer in (False, True):
        with pytest.raises(ORT_ERRORS) as e:
            ortquant.InferenceSession(model, integer=integer)
        if "auto_pad" not in attrs:  # onnxruntime's own auto_pad parser names no node
            assert "pool" in str(e.value), str(e.value)


def test_malformed_int8_maxpool_is_left_as_it_is():
    model = _with_pool((2, 3), (2, 3), (0, 1, 1, 3))
    pool = next(n for n in model.graph.node if n.op_type == "MaxPool")
    strides = next(a for a in pool.attribute if a.name == "strides")
    del strides.ints[:]  # an empty list: the rewrite used to crash in make_node
    assert rewrite_int_maxpool_pads(model).graph.node[-2].op_type == "MaxPool"  # rewritten, strides kept empty
    kernel = next(a for a in pool.attribute if a.name == "kernel_shape")
    kernel.ints[0] = 0  # a kernel size below 1: onnxruntime's to refuse
    assert rewrite_int_maxpool_pads(model) is model
