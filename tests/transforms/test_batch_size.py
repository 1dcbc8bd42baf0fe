"""set_batch_size: a fixed batch dimension made symbolic (or another size) only where the graph provably allows it.

The proof that matters: on published models with a fixed batch of 1, the rewritten model's outputs for a batch of 8
equal the original model's outputs row by row, bit for bit. The refusals name the input, output or node.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import IR_VERSION
from ortquant.transforms import ModelError
from ortquant.transforms.batch_size import set_batch_size

REPO = Path(__file__).resolve().parents[2]
REALWORLD = REPO.parent / "shared" / "conformance" / "realworld"
MODELS = REPO / "models"

# Published files with a fixed batch of 1, each rewritable: a Reshape [1, -1] (zoo_tfc_*_dom), a Flatten
# (labs_gtsrb12_w2a3), Reshapes with a leading -1 under allowzero (qkt_qconv2d_conversion), shapes computed from
# Shape (thinker), Quant in the default domain (radioml), a plain MLP (zoo_unsw_nb15).
REWRITABLE = [
    "zoo_tfc_1w1a_dom",
    "labs_gtsrb12_w2a3",
    "qkt_qconv2d_conversion",
    "thinker_resnet50_fashion_mnist",
    "radioml_vgg10_w8a8",
    "zoo_unsw_nb15_mlp_w2a2",
]


def _shape(vi: onnx.ValueInfoProto) -> list[int | str]:
    return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in vi.type.tensor_type.shape.dim]


def _batch_of_8(sample: dict[str, np.ndarray], rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The sample plus 7 perturbed copies (distinct rows, in the sample's range and dtype)."""
    out = {}
    for name, v in sample.items():
        rows = [v]
        for _ in range(7):
            if v.dtype.kind == "f":
                noise = rng.standard_normal(v.shape) * (float(np.abs(v).max()) * 0.3 + 0.1)
                rows.append((v + noise).astype(v.dtype))
            else:
                rows.append(v)
        out[name] = np.concatenate(rows)
    return out


def _row_by_row(model: str | onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    sess = ortquant.InferenceSession(model)
    n = len(next(iter(feeds.values())))
    runs = [sess.run(None, {k: v[i : i + 1] for k, v in feeds.items()}) for i in range(n)]
    return [np.concatenate([r[j] for r in runs]) for j in range(len(runs[0]))]


def _assert_same(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape)
        assert np.array_equal(g, w, equal_nan=True), float(np.max(np.abs(g.astype(np.float64) - w)))


@pytest.mark.parametrize("name", REWRITABLE)
def test_published_model_batch_of_8_equals_row_by_row(name: str, rng):
    path = REALWORLD / f"{name}.onnx"
    if not path.is_file():
        pytest.skip(f"{path} is not here (the shared conformance corpus)")
    model = onnx.load(path)
    z = np.load(REALWORLD / f"{name}.npz")
    feeds = _batch_of_8({k[3:]: z[k] for k in z.files if k.startswith("in:")}, rng)
    want = _row_by_row(str(path), feeds)
    with pytest.raises(Exception, match=r"(?i)dimension|shape|Got"):  # as published it takes one row per run
        ortquant.InferenceSession(str(path)).run(None, feeds)

    dynamic = set_batch_size(model, None)
    assert dynamic is not model
    for vi in [*(v for v in dynamic.graph.input if v.name in feeds), *dynamic.graph.output]:
        assert _shape(vi)[0] == "batch", vi
    _assert_same(ortquant.InferenceSession(dynamic).run(None, feeds), want)
    # one row still works, and the input model is untouched
    _assert_same(
        ortquant.InferenceSession(dynamic).run(None, {k: v[:1] for k, v in feeds.items()}), [w[:1] for w in want]
    )
    assert onnx.load(path).SerializeToString() == model.SerializeToString()

    fixed8 = set_batch_size(model, 8)
    assert all(_shape(v)[0] == 8 for v in fixed8.graph.input if v.name in feeds)
    _assert_same(ortquant.InferenceSession(fixed8).run(None, feeds), want)


def _fixed_cnn() -> onnx.ModelProto:
    """models/cnn_w4a4.onnx as a QONNX export with a fixed batch writes it: [1, ...] everywhere, Reshape [1, 512]."""
    model = onnx.load(MODELS / "cnn_w4a4.onnx")
    for vi in [*model.graph.input, *model.graph.output]:
        vi.type.tensor_type.shape.dim[0].dim_value = 1
    inits = {t.name: t for t in model.graph.initializer}
    (reshape,) = [n for n in model.graph.node if n.op_type == "Reshape"]
    shape = numpy_helper.to_array(inits[reshape.input[1]])
    assert shape.tolist() == [-1, 512]
    inits[reshape.input[1]].CopyFrom(numpy_helper.from_array(np.array([1, 512], np.int64), reshape.input[1]))
    return model


def test_bundled_cnn_with_a_fixed_batch(rng):
    model = _fixed_cnn()
    x = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    want = _row_by_row(model, {"global_in": x})
    dynamic = set_batch_size(model, None)
    (reshape,) = [n for n in dynamic.graph.node if n.op_type == "Reshape"]
    shape = {t.name: t for t in dynamic.graph.initializer}[reshape.input[1]]
    assert numpy_helper.to_array(shape).tolist() == [0, 512]  # "copy the input's batch"
    assert not [a for a in reshape.attribute if a.name == "allowzero"]  # the constant has no zero to keep
    _assert_same(ortquant.InferenceSession(dynamic).run(None, {"global_in": x}), want)
    _assert_same(ortquant.InferenceSession(dynamic, integer=True).run(None, {"global_in": x}),
                 _row_by_row_integer(model, x))  # fmt: skip


def _row_by_row_integer(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    sess = ortquant.InferenceSession(model, integer=True)
    return [np.concatenate([sess.run(None, {"global_in": x[i : i + 1]})[0] for i in range(len(x))])]


def test_model_with_a_symbolic_batch_is_returned_as_is():
    model = onnx.load(MODELS / "cnn_w4a4.onnx")
    assert set_batch_size(model, None) is model
    fixed = set_batch_size(model, 4)
    assert _shape(fixed.graph.input[0]) == [4, 3, 32, 32] and _shape(fixed.graph.output[0]) == [4, 10]


def _model(nodes, inputs, outputs, inits=(), value_info=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits), value_info=list(value_info))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = IR_VERSION
    return model


def _i64(name: str, values: list[int]) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


def test_reshape_that_is_not_the_batch_is_refused_naming_the_node():
    # [1, 12] -> [3, 4] -> [1, 12]: runs for one row, but the 3 rows of the middle are not the batch.
    model = _model(
        [
            helper.make_node("Reshape", ["x", "s34"], ["m"], name="to_3x4"),
            helper.make_node("Relu", ["m"], ["r"]),
            helper.make_node("Reshape", ["r", "s112"], ["y"], name="back"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])],
        [_i64("s34", [3, 4]), _i64("s112", [1, 12])],
    )
    with pytest.raises(ModelError, match=r"output 'y' .*node 'to_3x4' \(Reshape\) makes 'm' of shape \[3, 4\]"):
        set_batch_size(model, None)


def test_inputs_without_a_common_batch_are_refused():
    model = _model(
        [helper.make_node("Add", ["a", "b"], ["y"])],
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    with pytest.raises(ModelError, match=r"do not share one leading \(batch\) dimension \('a': 1, 'b': 4\)"):
        set_batch_size(model, None)


def test_allowzero_reshape_with_a_zero_is_refused():
    model = _model(
        [helper.make_node("Reshape", ["x", "s"], ["y"], name="keep_zero", allowzero=1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 0, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 0])],
        [_i64("s", [1, 3, 0])],
    )
    with pytest.raises(ModelError, match="keep_zero"):
        set_batch_size(model, None)


def test_shared_shape_constant_is_rewritten_only_for_the_batch(rng):
    # The same [1, -1] constant flattens the input (batch-leading) and a weight (not): only the first changes.
    w = rng.standard_normal((1, 2, 6)).astype(np.float32)
    model = _model(
        [
            helper.make_node("Reshape", ["x", "flat"], ["xf"], name="flatten_x"),
            helper.make_node("Reshape", ["w", "flat"], ["wf"], name="flatten_w"),
            helper.make_node("Add", ["xf", "wf"], ["y"]),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 12])],
        [_i64("flat", [1, -1]), numpy_helper.from_array(w, "w")],
        [helper.make_tensor_value_info("xf", TensorProto.FLOAT, [1, 12])],
    )
    dynamic = set_batch_size(model, None)
    by_name = {n.name: n for n in dynamic.graph.node}
    assert by_name["flatten_w"].input[1] == "flat" and by_name["flatten_x"].input[1] != "flat"
    assert [_shape(v) for v in dynamic.graph.value_info] == [["batch", 12]]
    x = rng.standard_normal((5, 3, 4)).astype(np.float32)
    (y,) = ortquant.InferenceSession(dynamic).run(None, {"x": x})
    np.testing.assert_array_equal(y, x.reshape(5, 12) + w.reshape(1, 12))


def test_bad_batch_argument():
    model = _fixed_cnn()
    for bad in (0, -1, 2.0, True, "8"):
        with pytest.raises(ValueError, match="positive int or None"):
            set_batch_size(model, bad)  # type: ignore[arg-type]


def _row_mixing(kind: str) -> onnx.ModelProto:
    """x [1, 4] -> y [1, 4] through an op that is per row only while the batch is 1."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    if kind == "softmax":
        return _model([helper.make_node("Softmax", ["x"], ["y"], axis=0, name="mix")], [x], [y])
    if kind == "reduce":  # x - mean over the batch, broadcast back: the shapes keep the batch, the values do not
        return _model(
            [
                helper.make_node("ReduceMean", ["x"], ["m"], axes=[0], keepdims=1, name="mix"),
                helper.make_node("Sub", ["x", "m"], ["y"]),
            ],
            [x],
            [y],
        )
    if kind == "slice":  # the first row only, tiled back
        return _model(
            [
                helper.make_node("Slice", ["x", "s", "e", "a"], ["first"], name="mix"),
                helper.make_node("Add", ["x", "first"], ["y"]),
            ],
            [x],
            [y],
            [_i64("s", [0]), _i64("e", [1]), _i64("a", [0])],
        )
    if kind == "transpose":
        return _model(
            [
                helper.make_node("Transpose", ["x"], ["t"], perm=[1, 0], name="mix"),
                helper.make_node("Transpose", ["t"], ["y"], perm=[1, 0]),
            ],
            [x],
            [y],
        )
    raise AssertionError(kind)


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("softmax", "works along the batch axis"),
        ("reduce", "reduces over the batch axis"),
        ("slice", "slices the batch axis"),
        ("transpose", "moves the batch axis"),
    ],
)
def test_ops_along_the_batch_axis_are_refused(kind: str, why: str):
    model = _row_mixing(kind)
    ortquant.InferenceSession(model).run(None, {"x": np.ones((1, 4), np.float32)})  # valid as exported
    with pytest.raises(ModelError, match=rf"node 'mix' \(\w+\) {why}.*1 row\(s\) at a time"):
        set_batch_size(model, None)
