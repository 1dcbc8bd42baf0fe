"""Integer mode's Flatten fusion (``transforms/integer_flatten.py``, the QGemm op's ``flatten`` attribute): a Flatten,
or a Reshape that flattens the same way, read only by a lowered dense layer goes into the op, which reads its input
flattened. The reference of every output is the same model prepared without this step (onnxruntime's Flatten /
Reshape, then the QGemm on the 2-D tensor), bit for bit; the models run through ``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import prepared_without, qgemm_model, registered_session
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import ORT_ERRORS
from ortquant.transforms.integer_chain import unchain
from ortquant.transforms.integer_flatten import fuse_integer_flatten

Q = "qonnx.custom_op.general"
STEP = "fuse_integer_flatten"


def _model(step: onnx.NodeProto, k: int, *, batch: object = "n", extra_output: bool = False) -> onnx.ModelProto:
    """Quant -> Conv (4 -> 6, 3 x 3, pads 1) -> Relu -> Quant -> ``step`` (f -> g) -> MatMul(Quant(W [k, 5]))."""
    rng = np.random.default_rng(5)
    p = {
        "w": (rng.standard_normal((6, 4, 3, 3)) * 0.3).astype(np.float32),
        "ws": np.float32(0.02),
        "cb": (rng.standard_normal(6) * 0.1).astype(np.float32),
        "d": (rng.standard_normal((k, 5)) * 0.3).astype(np.float32),
        "ds": np.float32(0.03),
        "z": np.float32(0),
        "b4": np.float32(4),
        "as": np.float32(0.05),
        "rs": np.float32(0.1),
    }
    nodes = [
        helper.make_node("Quant", ["x", "as", "z", "b4"], ["xq"], domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "z", "b4"], ["wq"], domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], pads=[1] * 4, kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Quant", ["r", "rs", "z", "b4"], ["f"], domain=Q, signed=0),
        step,
        helper.make_node("Quant", ["d", "ds", "z", "b4"], ["dq"], domain=Q, signed=1, narrow=1),
        helper.make_node("MatMul", ["g", "dq"], ["y"]),
    ]
    inits = [_init(k2, v) for k2, v in p.items()]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_output:
        outputs.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, None))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4, 5, 5])], outputs,
        initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _reshape(shape: list[int], **attrs: int) -> tuple[onnx.NodeProto, onnx.TensorProto]:
    return helper.make_node("Reshape", ["f", "shape"], ["g"], **attrs), _init("shape", shape, np.int64)


def _with_shape(m: onnx.ModelProto, t: onnx.TensorProto | None) -> onnx.ModelProto:
    if t is not None:
        m.graph.initializer.append(t)
    return m


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in unchain(m)]


def _same_bits(m: onnx.ModelProto, batch: int = 3) -> np.ndarray:
    x = np.random.default_rng(2).standard_normal((batch, 4, 5, 5)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})
    want = registered_session(prepared_without(m, STEP)).run(None, {"x": x})
    for a, b in zip(got, want, strict=True):
        assert a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    return got[0]


@pytest.mark.parametrize(
    "build,axis,rows",
    [
        (lambda: (helper.make_node("Flatten", ["f"], ["g"]), None), 1, 3),
        (lambda: (helper.make_node("Flatten", ["f"], ["g"], axis=-3), None), 1, 3),  # negative: X's rank is known
        (lambda: (helper.make_node("Flatten", ["f"], ["g"], axis=2), None), 2, 18),  # [n * 6, 25]
        (lambda: _reshape([-1, 150]), 1, 3),
        (lambda: _reshape([0, 150]), 1, 3),
    ],
    ids=["flatten", "flatten-negative-axis", "flatten-axis-2", "reshape-minus-1", "reshape-copy-0"],
)
def test_fused_flatten_keeps_every_bit(build, axis: int, rows: int):
    step, shape = build()
    k = 25 if axis == 2 else 150
    m = _with_shape(_model(step, k), shape)
    prepared = ortquant.prepare_model(m, integer=True)
    assert "Flatten" not in _ops(prepared) and "Reshape" not in _ops(prepared), _ops(prepared)
    gemm = next(n for n in unchain(prepared) if n.op_type.startswith("QGemm"))
    assert [a.i for a in gemm.attribute if a.name == "flatten"] == [axis]
    y = _same_bits(m)
    assert y.shape == (rows, 5)


def test_reshape_with_the_static_batch_is_fused():
    step, shape = _reshape([3, 150])
    m = _with_shape(_model(step, 150, batch=3), shape)
    assert "Reshape" not in _ops(ortquant.prepare_model(m, integer=True))
    _same_bits(m)


@pytest.mark.parametrize(
    "target,k",
    [
        ([-1, 75], 75),  # [n, 6, 5, 5] -> [2n, 75]: not a Flatten at axis 1
        ([2, 75], 75),  # a fixed first dimension that is not the batch
    ],
)
def test_a_reshape_that_is_not_a_flatten_stays(target: list[int], k: int):
    step, shape = _reshape(target)
    m = _with_shape(_model(step, k, batch=1 if target[0] == 2 else "n"), shape)
    prepared = ortquant.prepare_model(m, integer=True)
    assert "Reshape" in _ops(prepared)
    assert not any(a.name == "flatten" for n in unchain(prepared) for a in n.attribute)
    _same_bits(m, batch=1)


@pytest.mark.parametrize("shape", [np.array([[-1], [150]], np.int64), np.array([-1, 150], np.int32)])
def test_a_reshape_onnxruntime_refuses_stays(shape: np.ndarray):
    """A shape that is not a 1-D int64 tensor ([[-1], [150]]: its values read flat are a Flatten's): onnxruntime
    refuses the Reshape in the default mode; fused away, integer mode would have run the file."""
    step = helper.make_node("Reshape", ["f", "shape"], ["g"])
    m = _with_shape(_model(step, 150), numpy_helper.from_array(shape, "shape"))
    assert "Reshape" in _ops(ortquant.prepare_model(m, integer=True))
    x = np.zeros((2, 4, 5, 5), np.float32)
    for integer in (False, True):
        with pytest.raises(ORT_ERRORS):
            ortquant.InferenceSession(m, integer=integer).run(None, {"x": x})


def test_a_flatten_read_elsewhere_stays():
    m = _model(helper.make_node("Flatten", ["f"], ["g"]), 150, extra_output=True)
    prepared = ortquant.prepare_model(m, integer=True)
    assert "Flatten" in _ops(prepared)
    assert fuse_integer_flatten(prepared) is prepared


def test_nothing_to_fuse_returns_the_model_itself():
    m = _model(helper.make_node("Flatten", ["f"], ["g"]), 150)
    assert fuse_integer_flatten(m) is m  # no QGemm yet: the rule runs after the lowering


def _qgemm(x_shape: list[int], k: int, flatten: int) -> onnx.ModelProto:
    w = np.random.default_rng(1).integers(-7, 8, (5, k))
    return qgemm_model(w, x_shape, flatten=flatten)


def test_the_op_flattens_as_onnx_flatten_does():
    """The op itself against numpy: QGemm(X, flatten = a) == QGemm(X.reshape(rows, K)) with the integer reference."""
    from ortquant.reference import integer as iref

    x = np.random.default_rng(4).random((2, 3, 4, 5)).astype(np.float32)
    for axis in range(5):
        k = int(np.prod(x.shape[axis:]))
        m = _qgemm(list(x.shape), k, axis)
        (y,) = registered_session(m).run(None, {"x": x})
        w = onnx.numpy_helper.to_array(m.graph.initializer[0]).astype(np.int64)
        x2 = x.reshape(-1, k)
        want = iref.qgemm(x2, w, np.full(5, 0.01), np.zeros(5), scale=0.05, zeropt=0.0, bits=4, signed=False)
        assert y.shape == (x2.shape[0], 5)
        np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize(
    "x_shape,k,flatten,message",
    [
        ([2, 3, 4], 12, 4, r"attribute 'flatten' is axis 4 but input X has rank 3"),
        (
            [2, 3, 4],
            10,
            1,
            r"input X of shape \(2, 3, 4\) flattened at axis 1 has 12 features but W \[N, K\] has K = 10",
        ),
    ],
)
def test_a_flatten_that_does_not_fit_is_a_clear_error(x_shape, k, flatten, message):
    s = registered_session(_qgemm(x_shape, k, flatten))
    with pytest.raises(Exception, match=message):
        s.run(None, {"x": np.zeros(x_shape, np.float32)})


def test_a_malformed_flatten_attribute_is_refused_by_name():
    with pytest.raises(Exception, match=r"attribute 'flatten' must be an axis in 0\.\.64"):
        registered_session(_qgemm([2, 3], 3, -5))
