"""fold_constant_arith: float arithmetic on constant initializers becomes initializers holding what onnxruntime
computes for the same nodes (the reference: the unfolded node run by onnxruntime), so the quantizers behind it
have constant inputs. Fixtures built here, plus the public RadioML export whose bias quantizer's bit width is
``Ceil(constant)``."""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _oracle import IR_VERSION
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant.transforms.fold_constant_arith import fold_constant_arith

REALWORLD = Path(__file__).resolve().parents[2] / ".." / "shared" / "conformance" / "realworld"
Q = "qonnx.custom_op.general"

# float32 values with the edge cases the folding must reproduce: signed zeros, halves (Round), infinities, NaN,
# subnormals, large and tiny magnitudes.
_EDGES = np.array(
    [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-45, -1e-45, 3.4e38, -3.4e38, np.inf, -np.inf, np.nan, 7.0, -3.25],
    np.float32,
)


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    outputs: list[str],
    opset: int = 13,
    inputs: list[onnx.ValueInfoProto] | None = None,
) -> onnx.ModelProto:
    g = helper.make_graph(
        nodes,
        "g",
        inputs or [],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(Q, 1)])
    m.ir_version = IR_VERSION
    return m


def _ort(m: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # onnxruntime computes each node
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds or {})


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("op", ["Identity", "Neg", "Abs", "Ceil", "Floor", "Round"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_folds_to_what_onnxruntime_computes(op: str, dtype: type) -> None:
    rng = np.random.default_rng(1)
    x = np.concatenate([_EDGES, rng.normal(0, 100, 48).astype(np.float32)]).astype(dtype)
    # consumer: Identity keeps the folded value a graph-internal one (a graph output is never folded)
    m = _model(
        [helper.make_node(op, ["x"], ["y"]), helper.make_node("Identity", ["y"], ["out"])],
        [numpy_helper.from_array(x, "x")],
        ["out"],
    )
    folded = fold_constant_arith(m)
    assert [n.op_type for n in folded.graph.node] == ["Identity"], "the constant node was not folded"
    got = numpy_helper.to_array(next(t for t in folded.graph.initializer if t.name == "y"))
    assert _same_bits(got, _ort(m)[0])
    assert "x" not in {t.name for t in folded.graph.initializer}, "an initializer only the folded node read stays"


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("shapes", [((16,), (16,)), ((4, 16), (16,)), ((16,), ())])
def test_binary_folds_to_what_onnxruntime_computes(op: str, shapes: tuple[tuple[int, ...], ...]) -> None:
    rng = np.random.default_rng(2)
    a = (rng.normal(0, 10, shapes[0]) if shapes[0] != (16,) else _EDGES).astype(np.float32)
    b = rng.normal(0, 3, shapes[1]).astype(np.float32)
    if shapes[1] == (16,):
        b[:4] = [0.0, -0.0, np.inf, np.nan]  # division by zero and IEEE specials
    m = _model(
        [helper.make_node(op, ["a", "b"], ["y"]), helper.make_node("Identity", ["y"], ["out"])],
        [numpy_helper.from_array(a, "a"), numpy_helper.from_array(b, "b")],
        ["out"],
    )
    folded = fold_constant_arith(m)
    assert [n.op_type for n in folded.graph.node] == ["Identity"]
    got = numpy_helper.to_array(next(t for t in folded.graph.initializer if t.name == "y"))
    assert _same_bits(got, _ort(m)[0])


def test_chain_folds_and_quantizer_becomes_constant() -> None:
    """Mul(Ceil(c), k) feeding a Quant's bit width: both fold; the Quant then has constant inputs only."""
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.float32(0.05), "s"),
        numpy_helper.from_array(np.float32(0.0), "z"),
        numpy_helper.from_array(np.float32(2.3), "c"),
        numpy_helper.from_array(np.float32(2.0), "k"),
    ]
    nodes = [
        helper.make_node("Ceil", ["c"], ["c1"]),
        helper.make_node("Mul", ["c1", "k"], ["bits"]),
        helper.make_node("Quant", ["w", "s", "z", "bits"], ["wq"], domain=Q, signed=1, narrow=0, rounding_mode="ROUND"),
        helper.make_node("MatMul", ["x", "wq"], ["y"]),
    ]
    m = _model(nodes, inits, ["y"], inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])])
    folded = fold_constant_arith(m)
    assert [n.op_type for n in folded.graph.node] == ["Quant", "MatMul"]
    inits_after = {t.name: numpy_helper.to_array(t) for t in folded.graph.initializer}
    assert inits_after["bits"] == np.float32(6.0)
    assert not {"c", "c1", "k"} & set(inits_after)
    x = np.random.default_rng(3).normal(0, 1, (2, 3)).astype(np.float32)
    want = ortquant.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]
    got = ortquant.InferenceSession(folded.SerializeToString()).run(None, {"x": x})[0]
    assert _same_bits(got, want)


def _one(op: str, a: np.ndarray, b: np.ndarray | None = None, **kw: object) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(a, "a")] + ([] if b is None else [numpy_helper.from_array(b, "b")])
    ins = ["a"] if b is None else ["a", "b"]
    return _model(
        [helper.make_node(op, ins, ["y"]), helper.make_node("Identity", ["y"], ["out"])], inits, ["out"], **kw
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "case",
    [
        "graph_output",
        "overridable",
        "int64",
        "mixed_types",
        "blow_up",
        "refused_by_onnxruntime",
        "attribute",
    ],
)
def test_not_folded(case: str) -> None:
    f = np.arange(4, dtype=np.float32)
    if case == "graph_output":
        m = _model([helper.make_node("Ceil", ["a"], ["y"])], [numpy_helper.from_array(f, "a")], ["y"])
    elif case == "overridable":  # an initializer that is also a graph input can be fed at run time
        m = _one("Ceil", f, inputs=[helper.make_tensor_value_info("a", TensorProto.FLOAT, [4])])
    elif case == "int64":  # integer arithmetic (wrap-around) is not taken
        m = _one("Add", np.arange(4, dtype=np.int64), np.arange(4, dtype=np.int64))
    elif case == "mixed_types":  # onnxruntime refuses it: it must still see it
        m = _one("Add", f, f.astype(np.float64))
    elif case == "blow_up":  # [64, 1] + [1, 64] -> 4096 values from 128: the file would grow
        m = _one("Add", np.zeros((64, 1), np.float32), np.zeros((1, 64), np.float32))
    elif case == "refused_by_onnxruntime":  # Round exists from opset 11: at opset 10 onnxruntime must refuse it
        m = _one("Round", f, opset=10)
    else:  # an attribute the op does not have: onnxruntime refuses the node
        m = _model(
            [helper.make_node("Neg", ["a"], ["y"], bogus=1), helper.make_node("Identity", ["y"], ["out"])],
            [numpy_helper.from_array(f, "a")],
            ["out"],
        )
    assert fold_constant_arith(m) is m


def test_initializer_read_elsewhere_is_kept() -> None:
    a = np.arange(4, dtype=np.float32)
    nodes = [
        helper.make_node("Neg", ["a"], ["na"]),
        helper.make_node("Add", ["na", "x"], ["s"]),
        helper.make_node("Add", ["s", "a"], ["out"]),
    ]
    m = _model(
        nodes,
        [numpy_helper.from_array(a, "a")],
        ["out"],
        inputs=[helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
    )
    folded = fold_constant_arith(m)
    assert [n.op_type for n in folded.graph.node] == ["Add", "Add"]
    assert {t.name for t in folded.graph.initializer} == {"a", "na"}
    x = np.float32([1, 2, 3, 4])
    assert _same_bits(_ort(folded, {"x": x})[0], _ort(m, {"x": x})[0])


def test_radioml_integer_prepare_runs_one_evaluation_session(monkeypatch: pytest.MonkeyPatch) -> None:
    """The published RadioML export computes its bias quantizer's bit width with Ceil: after the fold, integer
    mode's prepare evaluates every weight quantizer in one onnxruntime session (two before: the Ceil subgraph had
    its own)."""
    path = REALWORLD / "radioml_vgg10_w8a8.onnx"
    if not path.exists():
        pytest.skip(f"{path} not present")
    fw = importlib.import_module("ortquant.transforms.fold_weight_quantizers")  # the module, not the function
    fw.clear_cache()
    created: list[int] = []
    real = ort.InferenceSession

    def counting(*args: object, **kwargs: object) -> ort.InferenceSession:
        created.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ort, "InferenceSession", counting)
    out = ortquant.prepare_model(onnx.load(str(path)), integer=True)
    assert not any(n.op_type == "Ceil" for n in out.graph.node)
    assert len(created) == 1, f"{len(created)} onnxruntime sessions during prepare"
