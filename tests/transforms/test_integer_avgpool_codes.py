"""Integer mode's average pool on codes (``transforms/integer_avgpool_codes.py``): QConv -> Quant -> AveragePool /
GlobalAveragePool / spatial ReduceMean becomes QConvCodes -> AvgPoolCodes. The expected outputs are computed here
from the integer reference (the convolution's float32 outputs, the Quant reference, a float64 mean of the quantized
values rounded to float32), independent of the transform and of the ops; the models run through
``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import prepared_without, qconv_params, qconv_reference
from onnx import TensorProto, helper

import ortquant
from ortquant.reference import qonnx as qref
from ortquant.transforms.integer_avgpool_codes import fuse_integer_avgpool_codes
from ortquant.transforms.integer_chain import unchain

Q = "qonnx.custom_op.general"


def _model(
    x_shape: list[int], pools: list[tuple[str, dict]], *, oscale: float = 0.0625, obits: int = 4, signed: int = 0,
    extra_output: str | None = None, relu: bool = True,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:  # fmt: skip
    """Quant -> Conv (pads 1) [-> Relu] -> Quant(os, obits) -> one pool per entry of ``pools`` -> y0, y1 ..."""
    p = qconv_params(np.random.default_rng(5), 6, x_shape[1], [3, 3])
    p.update(os=np.float32(oscale), oz=np.float32(0), ob=np.float32(obits))  # the output quantizer
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], name="conv", pads=[1] * 4, kernel_shape=[3, 3]),
    ]
    src = "c"
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["r"], name="relu"))
        src = "r"
    nodes.append(helper.make_node("Quant", [src, "os", "oz", "ob"], ["v"], name="oquant", domain=Q, signed=signed))
    outputs = []
    for i, (op, attrs) in enumerate(pools):
        nodes.append(helper.make_node(op, ["v"], [f"y{i}"], name=f"pool{i}", **attrs))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
    if extra_output:
        outputs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)], outputs,
        initializer=[_init(name, v) for name, v in p.items()],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, p


def _quantized(x: np.ndarray, p: dict[str, np.ndarray], signed: int, relu: bool) -> np.ndarray:
    """The quantizer's output on the integer-mode convolution's float32 output (the values the pool averages)."""
    y = qconv_reference(x, p, [3, 3], relu=relu)
    return qref.quant(y, p["os"], p["oz"], p["ob"], signed=bool(signed), narrow=False, rounding_mode="ROUND")


def _mean(v: np.ndarray, scale: float, k: list[int] | None, s: list[int] | None) -> np.ndarray:
    """float32 of the float64 mean of the quantizer's real values scale * (q - z) (recovered from its float32
    outputs ``v``) over each window (no pads, floor); k None: the whole plane."""
    step = np.float64(np.float32(scale))
    v64 = np.rint(v.astype(np.float64) / step) * step
    if k is None:
        return v64.mean(axis=(2, 3), keepdims=True).astype(np.float32)
    n, c, h, w = v.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = v64[:, :, i * s[0] : i * s[0] + k[0], j * s[1] : j * s[1] + k[1]].sum(axis=(2, 3))
    return (out / (k[0] * k[1])).astype(np.float32)


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in unchain(m)]


def _run(m: onnx.ModelProto, x: np.ndarray, **kw: bool) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ortquant.InferenceSession(m, sess_options=so, **kw).run(None, {"x": x})


CASES = [
    # (pools, quantizer scale, bits, signed, relu)
    ([("AveragePool", {"kernel_shape": [4, 4], "strides": [4, 4]})], 0.0625, 4, 0, True),  # Brevitas' TruncAvgPool
    ([("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2]})], 0.0371, 8, 1, False),  # overlapping, odd k
    ([("GlobalAveragePool", {})], 0.0371, 8, 0, True),  # unsigned 8-bit: codes stored as a - 128
    ([("AveragePool", {"kernel_shape": [2, 3], "strides": [2, 1], "count_include_pad": 1}),
      ("GlobalAveragePool", {})], 0.125, 3, 1, False),  # two readers
    ([("ReduceMean", {"axes": [2, 3]})], 0.0371, 8, 0, True),  # a ResNet head's global pool
    ([("ReduceMean", {"axes": [-1, -2], "keepdims": 1})], 0.0625, 4, 0, True),
]  # fmt: skip


@pytest.mark.parametrize("case", range(len(CASES)))
def test_pool_of_codes_is_the_mean_of_the_quantized_values(case: int) -> None:
    pools, oscale, obits, signed, relu = CASES[case]
    m, p = _model([2, 3, 12, 16], pools, oscale=oscale, obits=obits, signed=signed, relu=relu)
    prepared = ortquant.prepare_model(m, integer=True)
    assert "AvgPoolCodes" in _ops(prepared) and "AveragePool" not in _ops(prepared), _ops(prepared)
    assert "QConvCodes" in _ops(prepared) and "Quant" not in _ops(prepared), _ops(prepared)
    x = (np.random.default_rng(case).standard_normal((2, 3, 12, 16)) * 0.4).astype(np.float32)
    v = _quantized(x, p, signed, relu)
    got = _run(m, x, integer=True)
    for i, (_op, attrs) in enumerate(pools):
        k = attrs.get("kernel_shape")
        want = _mean(v, oscale, k, attrs.get("strides"))
        np.testing.assert_array_equal(got[i], want)
    # against the pipeline without this step (onnxruntime's float pool: float32 additions of the quantizer's float32
    # outputs): within their roundings, a few float32 ulps of the largest value (equal bits where the scale is a
    # power of two: every value and sum exact)
    without = _run(prepared_without(m, "fuse_integer_avgpool_codes"), x)
    for g, w in zip(got, without, strict=True):
        if oscale in (0.0625, 0.125):
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=0, atol=2.0**-20 * float(np.max(np.abs(v))))


@pytest.mark.parametrize(
    ("pool", "extra"),
    [
        (("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "pads": [1, 1, 1, 1]}), None),  # padded
        (("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}), None),
        (("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]}), None),  # not an average (another rule's)
        (("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}), "v"),  # the quantizer's output is an output
        (("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]}), "r"),  # the layer's output is read twice
        (("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2], "narrow": 1}), None),  # onnxruntime refuses it
    ],
)
def test_not_fused(pool: tuple[str, dict], extra: str | None) -> None:
    m, _ = _model([1, 3, 8, 8], [pool], extra_output=extra)
    prepared = ortquant.prepare_model(m, integer=True)
    assert "AvgPoolCodes" not in _ops(prepared), _ops(prepared)
    # the step itself leaves such a model unchanged
    before = prepared_without(m, "fuse_integer_avgpool_codes")
    assert fuse_integer_avgpool_codes(before) is before


def test_model_without_lowered_layers_is_returned_as_is() -> None:
    m, _ = _model([1, 3, 8, 8], [("AveragePool", {"kernel_shape": [2, 2], "strides": [2, 2]})])
    assert fuse_integer_avgpool_codes(m) is m


def test_reduce_mean_with_axes_as_an_input_is_a_global_pool() -> None:
    """Opset 18: ReduceMean's axes are a constant input."""
    m, p = _model([1, 3, 12, 16], [("GlobalAveragePool", {})], oscale=0.0625)
    pool = next(n for n in m.graph.node if n.op_type == "GlobalAveragePool")
    pool.op_type = "ReduceMean"
    pool.input.append("axes")
    m.graph.initializer.append(_init("axes", [2, 3], np.int64))
    m.opset_import[0].version = 18
    prepared = ortquant.prepare_model(m, integer=True)
    assert "AvgPoolCodes" in _ops(prepared) and "ReduceMean" not in _ops(prepared), _ops(prepared)
    x = (np.random.default_rng(7).standard_normal((1, 3, 12, 16)) * 0.4).astype(np.float32)
    want = _mean(_quantized(x, p, 0, True), 0.0625, None, None)
    np.testing.assert_array_equal(_run(m, x, integer=True)[0], want)


@pytest.mark.parametrize("attrs", [{"axes": [2, 3], "keepdims": 0}, {"axes": [1, 2]}, {"axes": [3]}, {}])
def test_other_reduce_means_stay(attrs: dict) -> None:
    """Not a global pool: the dimensions dropped, other axes, one axis, every axis."""
    m, _ = _model([1, 3, 12, 16], [("ReduceMean", attrs)])
    prepared = ortquant.prepare_model(m, integer=True)
    assert "ReduceMean" in _ops(prepared) and "AvgPoolCodes" not in _ops(prepared), _ops(prepared)
    x = (np.random.default_rng(8).standard_normal((1, 3, 12, 16)) * 0.4).astype(np.float32)
    axes = tuple(attrs["axes"]) if "axes" in attrs else None
    want = np.zeros((1, 6, 12, 16)).mean(axis=axes, keepdims=bool(attrs.get("keepdims", 1))).shape
    assert _run(m, x, integer=True)[0].shape == want
