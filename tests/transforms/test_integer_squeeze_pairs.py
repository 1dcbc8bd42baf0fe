"""Integer mode's removal of Squeeze -> Unsqueeze pairs (``transforms/integer_squeeze_pairs.py``): between the 1-D
layers integer mode runs as 2-D ones of height 1. The reference of every output is the model without the step, bit
for bit (a published 1-D network and a stack built here, through ``ortquant.InferenceSession``); the cases left
alone are checked on graphs of standard ops."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import prepared_without, registered_session
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms.integer_chain import unchain
from ortquant.transforms.integer_squeeze_pairs import cancel_squeeze_pairs

Q = "qonnx.custom_op.general"
STEP = "cancel_squeeze_pairs"
ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("ORTQUANT_REALWORLD", ROOT.parent / "shared" / "conformance" / "realworld"))


def _pairs(nodes: list[onnx.NodeProto]) -> int:
    return sum(1 for a, b in itertools.pairwise(nodes) if a.op_type == "Squeeze" and b.op_type == "Unsqueeze")


def _conv1d_stack(opset: int, layers: int = 3) -> onnx.ModelProto:
    """Quant -> (Conv1d 3-tap, pads 1 -> Relu -> Quant) x layers -> Flatten -> MatMul."""
    rng = np.random.default_rng(8)
    inits = [_init("z", 0), _init("b4", 4), _init("as", 0.05), _init("rs", 0.1)]
    nodes = [helper.make_node("Quant", ["x", "as", "z", "b4"], ["q0"], domain=Q, signed=0)]
    c = 2
    for i in range(layers):
        inits += [_init(f"w{i}", rng.standard_normal((5, c, 3)) * 0.3), _init(f"ws{i}", 0.02)]
        nodes += [
            helper.make_node("Quant", [f"w{i}", f"ws{i}", "z", "b4"], [f"wq{i}"], domain=Q, signed=1, narrow=1),
            helper.make_node("Conv", [f"q{i}", f"wq{i}"], [f"c{i}"], pads=[1, 1], kernel_shape=[3]),
            helper.make_node("Relu", [f"c{i}"], [f"r{i}"]),
            helper.make_node("Quant", [f"r{i}", "rs", "z", "b4"], [f"q{i + 1}"], domain=Q, signed=0),
        ]
        c = 5
    inits += [_init("d", rng.standard_normal((5 * 9, 4)) * 0.3), _init("ds", 0.03)]
    nodes += [
        helper.make_node("Flatten", [f"q{layers}"], ["f"]),
        helper.make_node("Quant", ["d", "ds", "z", "b4"], ["dq"], domain=Q, signed=1, narrow=1),
        helper.make_node("MatMul", ["f", "dq"], ["y"]),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _same_bits(m: onnx.ModelProto, feeds: list[dict[str, np.ndarray]]) -> onnx.ModelProto:
    prepared = ortquant.prepare_model(m, integer=True)
    got_sess = ortquant.InferenceSession(m, integer=True)
    want_sess = registered_session(prepared_without(m, STEP))
    for f in feeds:
        for got, want in zip(got_sess.run(None, f), want_sess.run(None, f), strict=True):
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    return prepared


@pytest.mark.parametrize("opset", [11, 17])  # axes an attribute before opset 13, an input from 13
def test_a_1d_stack_loses_its_pairs_and_keeps_every_bit(opset: int) -> None:
    m = _conv1d_stack(opset)
    assert _pairs(unchain(prepared_without(m, STEP))) == 2
    rng = np.random.default_rng(1)
    prepared = _same_bits(m, [{"x": rng.standard_normal((b, 2, 9)).astype(np.float32)} for b in (1, 3)])
    nodes = unchain(prepared)
    assert _pairs(nodes) == 0
    assert [n.op_type for n in prepared.graph.node].count("Squeeze") == 1  # the last layer's, before Flatten


def test_radioml_loses_its_pairs_and_keeps_every_bit() -> None:
    path = CORPUS / "radioml_vgg10_w8a8.onnx"
    if not path.exists():
        pytest.skip(f"the real-world corpus is not at {CORPUS} (set ORTQUANT_REALWORLD)")
    m = onnx.load(path)
    rng = np.random.default_rng(4)
    prepared = _same_bits(m, [{"inp.1": rng.standard_normal((1, 2, 1024)).astype(np.float32)} for _ in range(2)])
    assert _pairs(list(prepared.graph.node)) == 0
    assert _pairs(unchain(prepared)) == 0


def _plain(squeeze: list[int], unsqueeze: list[int], *, shape: list, opset: int = 17, extra: str | None = None):
    """x [shape] -> Relu -> a -> Squeeze(squeeze) -> s -> Unsqueeze(unsqueeze) -> u -> Neg -> y (+ ``extra`` also a
    graph output)."""
    inits = []
    if opset >= 13:
        inits = [_init("sa", squeeze, np.int64), _init("ua", unsqueeze, np.int64)]
        sq = helper.make_node("Squeeze", ["a", "sa"], ["s"])
        un = helper.make_node("Unsqueeze", ["s", "ua"], ["u"])
    else:
        sq = helper.make_node("Squeeze", ["a"], ["s"], axes=squeeze)
        un = helper.make_node("Unsqueeze", ["s"], ["u"], axes=unsqueeze)
    nodes = [helper.make_node("Relu", ["x"], ["a"]), sq, un, helper.make_node("Neg", ["u"], ["y"])]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra:
        outputs.append(helper.make_tensor_value_info(extra, TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs,
                          initializer=inits)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _run(m: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})


@pytest.mark.parametrize(
    "squeeze,unsqueeze,opset",
    [([2], [2], 17), ([-2], [2], 17), ([2], [-2], 11), ([1, 3], [1, 3], 17)],
)
def test_a_pair_that_gives_back_its_input_goes(squeeze, unsqueeze, opset) -> None:
    shape = [2, 1, 1, 1, 5] if len(squeeze) == 2 else [2, 3, 1, 5]
    m = _plain(squeeze, unsqueeze, shape=shape, opset=opset)
    out = cancel_squeeze_pairs(m)
    assert [n.op_type for n in out.graph.node] == ["Relu", "Neg"]
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(_run(out, x)[0], _run(m, x)[0])


def test_a_pair_whose_output_is_a_graph_output_keeps_its_name() -> None:
    m = _plain([2], [2], shape=[2, 3, 1, 5], extra="u")
    out = cancel_squeeze_pairs(m)
    assert [n.op_type for n in out.graph.node] == ["Relu", "Neg", "Identity"]
    x = np.random.default_rng(0).standard_normal((2, 3, 1, 5)).astype(np.float32)
    for got, want in zip(_run(out, x), _run(m, x), strict=True):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    "case,kwargs",
    [
        ("other axes", {"squeeze": [2], "unsqueeze": [1], "shape": [2, 3, 1, 5]}),
        ("size not known to be 1", {"squeeze": [2], "unsqueeze": [2], "shape": [2, 3, "h", 5]}),
        ("squeezed output read elsewhere", {"squeeze": [2], "unsqueeze": [2], "shape": [2, 3, 1, 5], "extra": "s"}),
        ("no axes", {"squeeze": [], "unsqueeze": [2], "shape": [2, 3, 1, 5]}),
    ],
)
def test_other_pairs_stay(case: str, kwargs: dict) -> None:
    m = _plain(**kwargs)
    assert cancel_squeeze_pairs(m) is m, case
