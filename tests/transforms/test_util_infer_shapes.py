"""_util.infer_shapes: onnx shape inference on models whose nodes use a custom domain the model does not import.

onnxruntime runs such files (qonnx's QKeras converter writes ``Quant`` in ``qonnx.custom_op.general`` without
importing it), but ``onnx.shape_inference.infer_shapes`` raises on them (or, for a domain used only inside a
subgraph, infers nothing), so every analysis that read its result lost all shapes. Each test builds the model
without the import and checks what the analysis sees now; where a model with the import exists as a twin, both must
give the same answer.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from ortquant.transforms._util import element_types, infer_shapes

Q = "qonnx.custom_op.general"
CL = "qonnx.custom_op.channels_last"


def _init(name: str, v: object) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(v, dtype=np.float32), name)


def _quant(x: str, out: str, s: str, z: str, b: str, signed: int = 1, narrow: int = 0) -> onnx.NodeProto:
    return helper.make_node(
        "Quant", [x, s, z, b], [out], name=f"q_{out}", domain=Q, signed=signed, narrow=narrow, rounding_mode="ROUND"
    )


def _model(
    nodes: list[onnx.NodeProto],
    inits: list[onnx.TensorProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[str],
    imports: tuple[str, ...] = (),
) -> onnx.ModelProto:
    """A model importing the default domain (opset 17) and ``imports`` (version 1) only; IR 10 (onnxruntime
    refuses onnx 1.23's default IR 14)."""
    g = helper.make_graph(
        nodes, "g", inputs, [helper.make_empty_tensor_value_info(o) for o in outputs], initializer=inits
    )
    opsets = [helper.make_opsetid("", 17), *(helper.make_opsetid(d, 1) for d in imports)]
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 10
    return m


def _shapes(graph: onnx.GraphProto) -> dict[str, list[int]]:
    return {
        vi.name: [d.dim_value for d in vi.type.tensor_type.shape.dim]
        for vi in [*graph.value_info, *graph.output]
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")
    }


def _raw_shapes(model: onnx.ModelProto) -> dict[str, list[int]]:
    """What plain onnx shape inference gives (nothing when it raises)."""
    from ortquant.schemas import register_schemas

    register_schemas()
    try:
        return _shapes(onnx.shape_inference.infer_shapes(model, strict_mode=False).graph)
    except Exception:
        return {}


def _quant_transpose(imports: tuple[str, ...] = ()) -> onnx.ModelProto:
    """x [1, 4, 3, 3] -> Quant (per-channel scale [1, 4, 1, 1]) -> q -> Transpose (no perm: reversed) -> t -> Relu
    -> y."""
    scale = np.array([0.1, 0.2, 0.3, 0.4], np.float32).reshape(1, 4, 1, 1)
    return _model(
        [
            _quant("x", "q", "s", "z", "b"),
            helper.make_node("Transpose", ["q"], ["t"], name="tr"),
            helper.make_node("Relu", ["t"], ["y"], name="relu"),
        ],
        [_init("s", scale), _init("z", 0), _init("b", 4)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
        ["y"],
        imports,
    )


def test_shapes_downstream_of_a_domain_the_model_does_not_import():
    m = _quant_transpose()
    before = m.SerializeToString()
    assert "t" not in _raw_shapes(m)  # plain onnx inference: the whole graph is lost
    g = infer_shapes(m)
    assert g is not None
    shapes = _shapes(g)
    assert shapes["q"] == [1, 4, 3, 3]
    assert shapes["t"] == [3, 3, 4, 1]
    assert shapes["y"] == [3, 3, 4, 1]
    assert m.SerializeToString() == before  # the import is added to a copy only
    assert _shapes(infer_shapes(_quant_transpose((Q,)))) == shapes  # type: ignore[arg-type]


def test_domain_used_only_in_a_subgraph_is_imported_too():
    """An If whose branches hold the Quant: plain inference types nothing after it."""

    def branch(name: str) -> onnx.GraphProto:
        nodes = [_quant("x", f"{name}_q", "s", "z", "b"), helper.make_node("Relu", [f"{name}_q"], [f"{name}_o"])]
        return helper.make_graph(nodes, name, [], [helper.make_empty_tensor_value_info(f"{name}_o")])

    m = _model(
        [
            helper.make_node("If", ["c"], ["y"], then_branch=branch("then"), else_branch=branch("else")),
            helper.make_node("Transpose", ["y"], ["t"]),
        ],
        [_init("s", 0.1), _init("z", 0), _init("b", 4)],
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
        ],
        ["t"],
    )
    assert "t" not in _raw_shapes(m)
    g = infer_shapes(m)
    assert g is not None and _shapes(g)["t"] == [3, 2]
    # and onnxruntime does run the file as it is
    (t,) = ortquant.InferenceSession(m).run(None, {"x": np.ones((2, 3), np.float32), "c": np.array(True)})
    assert t.shape == (3, 2)


def test_failure_is_none_with_the_message(monkeypatch):
    def fail(*_args: object, **_kwargs: object) -> onnx.ModelProto:
        raise onnx.shape_inference.InferenceError("no way")

    monkeypatch.setattr(onnx.shape_inference, "infer_shapes", fail)
    errors: list[str] = []
    assert infer_shapes(_quant_transpose(), errors=errors) is None
    assert errors == ["no way"]
    assert infer_shapes(_quant_transpose()) is None


@pytest.mark.parametrize("data_prop", [False, True])
def test_model_importing_everything_is_inferred_as_before(data_prop: bool):
    m = _quant_transpose((Q,))
    want = _shapes(onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=data_prop).graph)
    assert _shapes(infer_shapes(m, data_prop=data_prop)) == want  # type: ignore[arg-type]


def test_element_types_downstream():
    m = _model(
        [_quant("x", "q", "s", "z", "b"), helper.make_node("Cast", ["q"], ["y"], to=TensorProto.INT8)],
        [_init("s", 1.0), _init("z", 0), _init("b", 8)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        ["y"],
    )
    types = element_types(m)
    assert types["q"] == TensorProto.FLOAT
    assert types["y"] == TensorProto.INT8


def test_grid_rank_for_a_per_channel_grid():
    """A per-channel grid passes a Transpose without perm only with the input's rank (grid.py's rule)."""
    from ortquant.transforms.grid import infer_grids

    g = infer_grids(_quant_transpose()).get("t")
    assert g is not None, "the Transpose's rank is unknown: no grid"
    want = infer_grids(_quant_transpose((Q,)))["t"]
    assert g.scale.shape == (1, 1, 4, 1)  # [1, 4, 1, 1] reversed
    np.testing.assert_array_equal(g.scale, want.scale)
    assert (g.lo, g.hi) == (want.lo, want.hi) == (-8, 7)


def _gemm(imports: tuple[str, ...] = ()) -> onnx.ModelProto:
    """x [2, 8] -> Quant (4-bit unsigned) -> Gemm (Quant weights [3, 8], transB) -> y."""
    rng = np.random.default_rng(3)
    return _model(
        [
            _quant("x", "xq", "as", "az", "ab", signed=0),
            _quant("w", "wq", "ws", "wz", "wb", narrow=1),
            helper.make_node("Gemm", ["xq", "wq"], ["y"], name="fc", transB=1),
        ],
        [
            _init("as", 0.05),
            _init("az", 0),
            _init("ab", 4),
            _init("w", rng.standard_normal((3, 8)) * 0.3),
            _init("ws", 0.02),
            _init("wz", 0),
            _init("wb", 4),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        ["y"],
        imports,
    )


def test_lower_integer_knows_the_gemm_input_rank(monkeypatch):
    """lower_integer lowers a Gemm only when its input A has rank 2; A is the Quant's output."""
    from ortquant.transforms.lower_integer import integer_plan, lower_integer

    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")
    (d,) = integer_plan(_gemm())
    assert d.integer, d.reason
    assert [n.op_type for n in lower_integer(_gemm()).graph.node] == ["QGemm"]
    (want,) = integer_plan(_gemm((Q,)))
    assert d.reason == want.reason
    x = np.random.default_rng(4).uniform(0, 1, (2, 8)).astype(np.float32)
    (got,) = ortquant.InferenceSession(_gemm(), integer=True).run(None, {"x": x})
    (ref,) = ortquant.InferenceSession(_gemm((Q,)), integer=True).run(None, {"x": x})
    np.testing.assert_array_equal(got, ref)


def _residual(imports: tuple[str, ...] = ()) -> onnx.ModelProto:
    """x [1, 4, 5, 5] -> Quant -> xq -> Conv (3x3, pad 1, Quant weights) -> c; Add(c, xq) -> y."""
    rng = np.random.default_rng(5)
    return _model(
        [
            _quant("x", "xq", "as", "az", "ab", signed=0),
            _quant("w", "wq", "ws", "wz", "wb", narrow=1),
            helper.make_node("Conv", ["xq", "wq"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
            helper.make_node("Add", ["c", "xq"], ["y"], name="add"),
        ],
        [
            _init("as", 0.05),
            _init("az", 0),
            _init("ab", 4),
            _init("w", rng.standard_normal((4, 4, 3, 3)) * 0.3),
            _init("ws", 0.02),
            _init("wz", 0),
            _init("wb", 4),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
        ["y"],
        imports,
    )


def test_integer_residual_fuses_the_add(monkeypatch):
    """fuse_integer_residual fuses an Add only when both operands' shapes are known; the Quant stays in the graph
    (the Add reads its output), so before the fix the prepared graph's inference failed."""
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")
    p = ortquant.prepare_model(_residual(), integer=True)
    assert [n.op_type for n in p.graph.node] == ["Quant", "QConv"]
    assert list(p.graph.node[1].input)[-1] == "xq"  # the residual input R
    x = np.random.default_rng(6).uniform(0, 1, (1, 4, 5, 5)).astype(np.float32)
    (got,) = ortquant.InferenceSession(_residual(), integer=True).run(None, {"x": x})
    (ref,) = ortquant.InferenceSession(_residual((Q,)), integer=True).run(None, {"x": x})
    np.testing.assert_array_equal(got, ref)


def _channels_last(imports: tuple[str, ...] = ()) -> onnx.ModelProto:
    """x [1, 5, 5, 4] -> Quant -> xq -> channels_last Conv (weights [3, 3, 3, 4]) -> y; no value_info."""
    rng = np.random.default_rng(7)
    return _model(
        [
            _quant("x", "xq", "as", "az", "ab", signed=0),
            helper.make_node(
                "Conv", ["xq", "w"], ["y"], name="conv", domain=CL, pads=[1, 1, 1, 1], kernel_shape=[3, 3]
            ),
        ],
        [_init("as", 0.05), _init("az", 0), _init("ab", 4), _init("w", rng.standard_normal((3, 3, 3, 4)) * 0.3)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 5, 4])],
        ["y"],
        imports,
    )


def test_channels_last_finds_the_input_rank():
    """The channels-last rewrite needs its input's rank; the input is a Quant's output without value_info."""
    from ortquant.transforms.channels_last import rewrite_channels_last

    out = rewrite_channels_last(_channels_last())
    assert [n.op_type for n in out.graph.node] == ["Quant", "Transpose", "Conv", "Transpose"]
    x = np.random.default_rng(8).uniform(0, 1, (1, 5, 5, 4)).astype(np.float32)
    (got,) = ortquant.InferenceSession(_channels_last(), exact=True).run(None, {"x": x})
    (ref,) = ortquant.InferenceSession(_channels_last((Q, CL)), exact=True).run(None, {"x": x})
    np.testing.assert_array_equal(got, ref)


def test_isolate_failing_nodes_tries_nodes_behind_the_custom_op():
    """``ortquant check``'s fallback tries each node alone with its inferred input types: a node whose input is a
    Quant's output was skipped (type unknown) when inference failed."""
    from ortquant.cli import isolate_failing_nodes

    m = _model(
        [
            _quant("x", "xq", "s", "z", "b"),
            helper.make_node("Conv", ["xq", "w"], ["y"], name="bad_conv"),  # a 3-D weight for a 4-D input
        ],
        [_init("s", 0.1), _init("z", 0), _init("b", 4), _init("w", np.ones((2, 4, 3)))],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
        ["y"],
    )
    failing = isolate_failing_nodes(m)
    assert [n.name for n, _ in failing] == ["bad_conv"], failing
