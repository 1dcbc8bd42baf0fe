"""lower_integer (integer mode): which layers are lowered, why others are not, and that a lowered layer computes
exactly the contract of docs/ops.md "Integer mode" (checked against an independent numpy computation from the
original QONNX parameters)."""

from __future__ import annotations

import _integer_fixtures
import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import ORT_ERRORS
from ortquant.reference import integer as iref
from ortquant.reference import qonnx as qref
from ortquant.transforms import ModelError, PrepareOptions, apply_pipeline
from ortquant.transforms.lower_integer import integer_plan, lower_integer

Q = "qonnx.custom_op.general"
backend = _integer_fixtures.backend  # the fixture, by this name


@pytest.fixture
def engine(monkeypatch):
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")


def _quant(x: str, out: str, s: str, z: str, b: str, **attrs: object) -> onnx.NodeProto:
    return helper.make_node("Quant", [x, s, z, b], [out], name=f"q_{out}", domain=Q, **attrs)


def _conv_model(
    act_bits: float = 4.0, act_signed: int = 0, act_zeropt: float = 0.0, rounding: str = "ROUND", bn: bool = True,
    extra_consumer: bool = False,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:  # fmt: skip
    """x -> Quant(act) -> Conv(3x3, pad 1, stride 2) <- Quant(W, per-channel, 5-bit narrow) [-> BN] -> Relu."""
    rng = np.random.default_rng(5)
    p = {
        "w": rng.standard_normal((6, 4, 3, 3)).astype(np.float32) * 0.2,
        "ws": (0.01 + rng.random((6, 1, 1, 1)) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(5),
        "as": np.float32(0.07),
        "az": np.float32(act_zeropt),
        "ab": np.float32(act_bits),
        "cb": rng.standard_normal(6).astype(np.float32) * 0.1,
        "gamma": (0.5 + rng.random(6)).astype(np.float32),
        "beta": rng.standard_normal(6).astype(np.float32) * 0.2,
        "mean": rng.standard_normal(6).astype(np.float32) * 0.1,
        "var": (0.5 + rng.random(6)).astype(np.float32),
    }
    nodes = [
        _quant("x", "xq", "as", "az", "ab", signed=act_signed, narrow=0, rounding_mode=rounding),
        _quant("w", "wq", "ws", "wz", "wb", signed=1, narrow=1, rounding_mode="ROUND"),
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2],
                         kernel_shape=[3, 3]),
    ]  # fmt: skip
    last = "c"
    if bn:
        nodes.append(
            helper.make_node(
                "BatchNormalization", ["c", "gamma", "beta", "mean", "var"], ["bn"], name="bn", epsilon=1e-3
            )
        )
        last = "bn"
    nodes.append(helper.make_node("Relu", [last], ["y"], name="relu"))
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])]
    if extra_consumer:  # the activation quantizer's output is also read elsewhere (a residual branch)
        nodes.append(helper.make_node("ReduceSum", ["xq"], ["r"], name="other", keepdims=0))
        outputs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4, 9, 9])], outputs,
        initializer=[_init(k, v) for k, v in p.items()],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, p


def _expected_conv(p: dict[str, np.ndarray], x: np.ndarray, bn: bool, **act: object) -> np.ndarray:
    """The contract computed from the QONNX parameters, independently of the transform."""
    wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    s = np.float64(p["as"]) * p["ws"].reshape(-1).astype(np.float64)
    b = p["cb"].astype(np.float64)
    if bn:
        g = p["gamma"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + np.float64(np.float32(1e-3)))
        s, b = s * g, (b - p["mean"].astype(np.float64)) * g + p["beta"].astype(np.float64)
    return iref.qconv(x, codes, s, b, strides=(2, 2), pads=(1, 1, 1, 1), relu=True, scale=float(p["as"]), **act)


@pytest.mark.parametrize(
    "bits,signed,zeropt,rounding",
    [(4, 0, 0.0, "ROUND"), (8, 0, 0.0, "HALF_UP"), (8, 1, 0.0, "FLOOR"), (6, 0, 9.0, "ROUND"), (2, 1, 0.0, "CEIL")],
)
@pytest.mark.parametrize("bn", [True, False])
def test_conv_layer_follows_the_contract(backend, bits, signed, zeropt, rounding, bn):
    m, p = _conv_model(bits, signed, zeropt, rounding, bn)
    lowered = lower_integer(m)
    ops = [n.op_type for n in lowered.graph.node]
    # BatchNormalization and Relu folded into the op (engine) or into Rescale (float-exact); "mixed" (auto) takes
    # the engine wherever the weight codes fit int8 (5-bit weights here)
    on_engine = backend in ("engine", "mixed")
    assert ops == (["QConv"] if on_engine else ["QuantCodes", "Conv", "Rescale"]), ops
    x = (np.random.default_rng(1).standard_normal((3, 4, 9, 9)) * 0.5).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    act = {"zeropt": zeropt, "bits": bits, "signed": bool(signed), "rounding_mode": rounding}
    want = _expected_conv(p, x, bn, **act)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # and it is close to the float path (the same quantized network, float32 arithmetic)
    ref_float = ortquant.InferenceSession(m, exact=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref_float, rtol=1e-5, atol=1e-5)


def _asymmetric_weights(m: onnx.ModelProto, p: dict[str, np.ndarray], zp: list[int], bits: int = 8) -> None:
    """The model's weight quantizer made unsigned with a zero point per output channel (as uint8 weights are stored:
    q in [0, 2^bits - 1], codes q - z), the weights on its grid."""
    rng = np.random.default_rng(8)
    wz = np.array(zp, np.float32).reshape(-1, 1, 1, 1)
    q = rng.integers(0, 1 << bits, p["w"].shape).astype(np.float32)
    p["w"] = ((q - wz) * p["ws"]).astype(np.float32)
    p["wz"], p["wb"] = wz, np.float32(bits)
    for t in m.graph.initializer:
        if t.name in ("w", "wz", "wb"):
            t.CopyFrom(_init(t.name, p[t.name]))
    node = _node(m, "q_wq")
    for a in node.attribute:
        if a.name == "signed":
            a.i = 0
        if a.name == "narrow":
            a.i = 0


@pytest.mark.parametrize("act_zeropt", [0.0, 130.0])
def test_uint8_weights_with_per_channel_zero_points_run_on_the_engine(backend, act_zeropt):
    # codes q - z up to 255 in magnitude: each channel spans at most 256 values, so the engine takes int8 codes and a
    # shift per channel (QConv's w_shift) wherever it runs, the same bits as the float-exact backend
    m, p = _conv_model(8, 0, act_zeropt, "ROUND", bn=True)
    _asymmetric_weights(m, p, [0, 255, 112, 141, 128, 30])
    lowered = lower_integer(m)
    ops = [n.op_type for n in lowered.graph.node]
    on_engine = backend in ("engine", "mixed")
    assert ops == (["QConv"] if on_engine else ["QuantCodes", "Conv", "Rescale"]), ops
    if on_engine:
        shift = next(helper.get_attribute_value(a) for a in lowered.graph.node[0].attribute if a.name == "w_shift")
        assert len(shift) == 6
    x = (np.random.default_rng(1).standard_normal((3, 4, 9, 9)) * 3).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=False, narrow=False, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    assert np.abs(codes).max() > 127  # wider than int8
    g = p["gamma"].astype(np.float64) / np.sqrt(p["var"].astype(np.float64) + np.float64(np.float32(1e-3)))
    s = np.float64(p["as"]) * p["ws"].reshape(-1).astype(np.float64) * g
    b = (p["cb"].astype(np.float64) - p["mean"].astype(np.float64)) * g + p["beta"].astype(np.float64)
    want = iref.qconv(x, codes, s, b, strides=(2, 2), pads=(1, 1, 1, 1), relu=True, scale=float(p["as"]),
                      zeropt=act_zeropt, bits=8, signed=False, rounding_mode="ROUND")  # fmt: skip
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    ref_float = ortquant.InferenceSession(m, exact=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, ref_float, rtol=1e-5, atol=1e-5)


def test_weights_spanning_more_than_256_codes_take_the_float_backend(monkeypatch):
    # integer-valued constant weights (as FINN's streamlining leaves them) of a channel spanning 601 codes: no int8
    # shift holds them; float32 sums are exact here, so that backend runs the layer
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "mixed")
    m, p = _conv_model(4, 0, 0.0, "ROUND", bn=False)
    w = np.random.default_rng(3).integers(-300, 301, p["w"].shape).astype(np.float32)
    w[:, 0, 0, 0], w[:, 0, 0, 1] = -300, 300
    m.graph.node.remove(_node(m, "q_wq"))
    _node(m, "conv").input[1] = "w"
    next(t for t in m.graph.initializer if t.name == "w").CopyFrom(_init("w", w))
    assert [n.op_type for n in lower_integer(m).graph.node] == ["QuantCodes", "Conv", "Rescale"]
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")
    (d,) = integer_plan(m)
    assert not d.integer and "no shift per output channel" in d.reason, d
    x = (np.random.default_rng(1).standard_normal((2, 4, 9, 9)) * 0.3).astype(np.float32)
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "mixed")
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    want = ortquant.InferenceSession(m, exact=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


def test_shared_activation_quantizer_stays_for_its_other_reader(engine):
    m, _ = _conv_model(extra_consumer=True)
    out = lower_integer(m)
    assert [n.op_type for n in out.graph.node] == ["Quant", "QConv", "ReduceSum"]
    x = np.random.default_rng(2).standard_normal((1, 4, 9, 9)).astype(np.float32)
    a = ortquant.InferenceSession(m, exact=True).run(None, {"x": x})
    b = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})
    np.testing.assert_array_equal(a[1], b[1])


def _gemm_model(
    act_from_input: bool = False, act_bits: float = 4.0, flatten: bool = True, act_zeropt: float = 0.0
) -> onnx.ModelProto:
    rng = np.random.default_rng(9)
    inits = [
        _init("w", rng.standard_normal((10, 48)) * 0.1),
        _init("ws", (0.01 + rng.random((10, 1)) * 0.02)),
        _init("wz", 0.0),
        _init("wb", 4.0),
        _init("as", 0.05),
        _init("az", act_zeropt),
        _init("ab", act_bits),
        _init("gb", rng.standard_normal(10) * 0.1),
    ]
    nodes = [_quant("w", "wq", "ws", "wz", "wb", signed=1, narrow=1)]
    src = "x"
    if not act_from_input:
        nodes.append(_quant("x", "xq", "as", "az", "ab", signed=1, narrow=0))
        src = "xq"
    if flatten:
        nodes.append(helper.make_node("MaxPool", [src], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]))
        nodes.append(helper.make_node("Flatten", ["p"], ["f"], name="flat"))
        src = "f"
    nodes.append(helper.make_node("Gemm", [src, "wq", "gb"], ["y"], name="fc", transB=1))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def test_gemm_through_maxpool_and_flatten(backend):
    m = _gemm_model()
    out = lower_integer(m)
    tail = ["QGemm"] if backend != "float" else ["QuantCodes", "MatMul", "Rescale"]
    assert [n.op_type for n in out.graph.node] == ["MaxPool", "Flatten", *tail]
    x = np.random.default_rng(3).standard_normal((5, 3, 8, 8)).astype(np.float32)
    a = ortquant.InferenceSession(m, exact=True).run(None, {"x": x})[0]
    b = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_gemm_with_uint8_weights_and_per_row_zero_points(backend):
    # an 8-bit unsigned weight quantizer with a zero point per output row: codes wider than int8, the engine takes
    # int8 codes and a shift per row (QGemm's w_shift); the same bits as the float-exact backend, the contract's
    m = _gemm_model(act_bits=8.0)
    rng = np.random.default_rng(6)
    ws = (0.01 + rng.random((10, 1)) * 0.02).astype(np.float32)
    wz = np.array([0, 255, 3, 250, 128, 17, 90, 200, 140, 60], np.float32).reshape(10, 1)
    w = ((rng.integers(0, 256, (10, 48)).astype(np.float32) - wz) * ws).astype(np.float32)
    for name, v in (("w", w), ("ws", ws), ("wz", wz), ("wb", np.float32(8))):
        next(t for t in m.graph.initializer if t.name == name).CopyFrom(_init(name, v))
    for a in _node(m, "q_wq").attribute:
        if a.name == "signed":
            a.i = 0
        if a.name == "narrow":
            a.i = 0
    out = lower_integer(m)
    tail = ["QGemm"] if backend != "float" else ["QuantCodes", "MatMul", "Rescale"]
    assert [n.op_type for n in out.graph.node] == ["MaxPool", "Flatten", *tail]
    if backend != "float":
        assert any(a.name == "w_shift" for a in out.graph.node[-1].attribute)
    x = (np.random.default_rng(3).standard_normal((5, 3, 8, 8)) * 2).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    xq = qref.quant(x, np.float32(0.05), np.float32(0), np.float32(8), signed=True, narrow=False, rounding_mode="ROUND")
    p = xq.reshape(5, 3, 4, 2, 4, 2).max(axis=(3, 5)).reshape(5, 48)  # the max pool, then the flatten
    codes = (np.rint(w.astype(np.float64) / ws) + 0).astype(np.int64)
    assert np.abs(codes).max() > 127
    s = np.float64(np.float32(0.05)) * ws.reshape(-1).astype(np.float64)
    b = numpy_helper.to_array(next(t for t in m.graph.initializer if t.name == "gb")).astype(np.float64)
    want = iref.qgemm(p, codes, s, b, scale=0.05, bits=8, signed=True)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize(
    "kwargs,reason",
    [
        ({"act_from_input": True}, "graph input"),
        ({"act_bits": 25.0}, "not an integer in 1..24"),
        ({"act_bits": 4.5}, "not an integer in 1..24"),
        # 9 to 16 bits: the values q - z and 0 must fit the two byte planes (2^16 levels)
        ({"act_bits": 16.0, "act_zeropt": 40000.0}, "values q - z in [-72768, -7233] and 0 span 72769 levels"),
    ],
)
def test_float_path_reasons(kwargs, reason):
    m = _gemm_model(**kwargs)
    (d,) = integer_plan(m)
    assert not d.integer and reason in d.reason, d
    assert lower_integer(m) is m


@pytest.mark.parametrize(
    "act_bits,act_zeropt",
    [(12.0, 0.0), (16.0, 0.0), (16.0, -300.0), (9.0, 5.0), (17.0, 0.0), (20.0, -1000.0), (24.0, 0.0)],
)
def test_wide_activation_quantizer_is_lowered(backend, act_bits, act_zeropt):
    """A 9- to 24-bit activation Quant right before the layer: the engine runs it on two byte planes (9 to 16 bits;
    the float-exact backend on its integer values: K * max|a| * max|w| < 2^24 there) or three (17 to 24 bits,
    whatever the backend: float32 sums of those codes would not be exact), bit for bit the reference."""
    m = _gemm_model(act_bits=act_bits, act_zeropt=act_zeropt)
    (d,) = integer_plan(m)
    hi = 2 ** (int(act_bits) - 1)
    three = act_bits > 16
    if three:
        want_reason = "QGemm (int8 engine on three byte planes)"
    else:
        want_reason = (
            "MatMul on integer values (float-exact)" if backend == "float" else "QGemm (int8 engine on two byte planes)"
        )
    assert d.integer and d.reason == want_reason, d
    out = lower_integer(m)
    (q,) = [n for n in out.graph.node if n.op_type in ("QGemm", "QuantCodes")]
    assert next(a.i for a in q.attribute if a.name == "act_bits") == int(act_bits)
    rng = np.random.default_rng(4)
    x = (rng.uniform(-1.1 * hi, 1.1 * hi, (5, 3, 8, 8)) * 0.05).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    wy = qref.quant(inits["w"], inits["ws"], inits["wz"], inits["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    w_codes = np.rint(wy.astype(np.float64) / inits["ws"]).astype(np.int64)
    assert three == (48 * hi * np.abs(w_codes).max() >= 2**24)  # float32 sums exact only up to 16 bits here
    act = {"scale": 0.05, "zeropt": act_zeropt, "bits": int(act_bits), "signed": True, "rounding_mode": "ROUND"}
    pooled = x.reshape(5, 3, 4, 2, 4, 2).max(axis=(3, 5)).reshape(5, 48)  # MaxPool 2x2 then Flatten
    acc = iref.act_codes(pooled, **act) @ w_codes.T
    s = np.float64(np.float32(0.05)) * inits["ws"].reshape(-1).astype(np.float64)
    want = iref.rescale(acc, s, inits["gb"].astype(np.float64), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_unquantized_weight_stays_float():
    m = _gemm_model()
    m.graph.node[-1].input[1] = "w"  # a float weight, no quantizer
    m.graph.node[-1].attribute[0].i = 1
    (d,) = integer_plan(m)
    assert not d.integer and "weight is not the output of a Quant" in d.reason


def test_exact_and_integer_together_is_an_error():
    with pytest.raises(ValueError, match="contradict"):
        apply_pipeline(_gemm_model(), PrepareOptions(exact=True, integer=True))


def test_integer_pipeline_reports_and_checks(backend):
    m = _gemm_model()
    out, changed = apply_pipeline(m, PrepareOptions(integer=True))
    assert "lower_integer" in changed
    onnx.checker.check_model(out)  # the integer ops have schemas
    (d,) = integer_plan(m)
    assert d.integer and d.reason == ("QGemm (int8 engine)" if backend != "float" else
                                      "MatMul on integer values (float-exact)")  # fmt: skip


def test_plan_names_the_xnor_path_of_1bit_layers(engine):
    """binary_mlp and tfc_w1a1 (BipolarQuant activations and weights) take XNOR-popcount; a 4-bit CNN the int8
    engine."""
    from pathlib import Path

    models = Path(__file__).resolve().parents[2] / "models"
    reasons = [d.reason for d in integer_plan(onnx.load(str(models / "binary_mlp.onnx")))]
    assert reasons == ["QGemm (XNOR-popcount) (+ BatchNormalization folded)", "QGemm (XNOR-popcount)"]
    tfc = [d.reason for d in integer_plan(onnx.load(str(models / "tfc_w1a1.onnx")))]  # FINN's TFC-w1a1
    assert len(tfc) == 4 and all(r.startswith("QGemm (XNOR-popcount)") for r in tfc), tfc
    tfc2 = [d.reason for d in integer_plan(onnx.load(str(models / "tfc_w1a2.onnx")))]  # FINN's TFC-w1a2
    assert len(tfc2) == 4 and all(r.startswith("QGemm (bit-serial)") for r in tfc2), tfc2
    assert all("(int8 engine)" in d.reason for d in integer_plan(onnx.load(str(models / "cnn4c2f_w4a4.onnx"))))


@pytest.mark.parametrize(
    "act,kernel",
    [
        ({"bits": 2.0, "signed": 0}, "bit-serial"),  # 0 .. 3
        ({"bits": 2.0, "signed": 1, "narrow": 1}, "bit-serial"),  # ternary
        ({"bits": 1.0, "signed": 0}, "bit-serial"),
        ({"bits": 3.0, "signed": 0}, "int8 engine"),  # codes up to 7
        ({"bits": 2.0, "signed": 0, "zeropt": 2.0}, "bit-serial"),  # a = q - 2 in -2 .. 1
        ({"bits": 2.0, "signed": 0, "zeropt": 5.0}, "int8 engine"),  # a in -5 .. -2, and 0: span 5
    ],
)
def test_plan_names_the_bit_serial_path(engine, act, kernel):
    """A Gemm with +-1 weights behind a 1- or 2-bit activation quantizer: the plan names the kernel QGemm takes,
    and integer mode agrees with the exact float execution."""
    m = _binary_weight_gemm(act)
    (d,) = integer_plan(m)
    assert d.reason == f"QGemm ({kernel})", d.reason
    x = np.random.default_rng(4).standard_normal((7, 70)).astype(np.float32)
    a = ortquant.InferenceSession(m, exact=True).run(None, {"x": x})[0]
    b = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def _binary_weight_gemm(act: dict[str, float]) -> onnx.ModelProto:
    """x [N, 70] -> Quant(act) -> Gemm(BipolarQuant weights [9, 70], transB) -> y."""
    rng = np.random.default_rng(6)
    inits = [
        _init("w", rng.standard_normal((9, 70))),
        _init("ws", 0.25),
        _init("as", 0.5),
        _init("az", act.get("zeropt", 0.0)),
        _init("ab", act["bits"]),
    ]
    nodes = [
        helper.make_node("BipolarQuant", ["w", "ws"], ["wq"], name="bq_w", domain=Q),
        _quant("x", "xq", "as", "az", "ab", signed=int(act["signed"]), narrow=int(act.get("narrow", 0))),
        helper.make_node("Gemm", ["xq", "wq"], ["y"], name="fc", transB=1),
    ]
    return _fc_model(nodes, inits, 70, 9)


def _fc_model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], k: int, n: int) -> onnx.ModelProto:
    """The graph x [N, k] -> nodes -> y [N, n] as an IR-10 model."""
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, n])], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def test_float_backend_only_where_float32_sums_are_exact(monkeypatch):
    """8-bit activations x 8-bit weights over K = 1100: 128 * 127 * 1100 > 2^24, so the engine runs it."""
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "float")
    rng = np.random.default_rng(4)
    inits = [
        _init("w", rng.standard_normal((3, 1100))),
        _init("ws", 0.01),
        _init("wz", 0.0),
        _init("wb", 8.0),
        _init("as", 0.01),
        _init("az", 0.0),
        _init("ab", 8.0),
    ]
    nodes = [
        _quant("w", "wq", "ws", "wz", "wb", signed=1, narrow=0),
        _quant("x", "xq", "as", "az", "ab", signed=1, narrow=0),
        helper.make_node("Gemm", ["xq", "wq"], ["y"], name="fc", transB=1),
    ]
    m = _fc_model(nodes, inits, 1100, 3)
    assert [n.op_type for n in lower_integer(m).graph.node] == ["QGemm"]
    m.graph.initializer[0].CopyFrom(_init("w", rng.standard_normal((3, 1000)) * 0.01))  # |w| codes <= ~4: exact
    m.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 1000
    assert [n.op_type for n in lower_integer(m).graph.node] == ["QuantCodes", "MatMul", "Rescale"]


def test_unknown_backend_is_an_error(monkeypatch):
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "gpu")
    with pytest.raises(ValueError, match="engine, float, mixed or auto"):
        lower_integer(_gemm_model())


# ---- malformed layers: integer mode leaves them to the float path, which onnxruntime judges -------------------


def _node(m: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in m.graph.node if n.name == name)


def _set_attr(node: onnx.NodeProto, attr: onnx.AttributeProto) -> None:
    kept = [a for a in node.attribute if a.name != attr.name]
    del node.attribute[:]
    node.attribute.extend([*kept, attr])


def _empty_ints(name: str) -> onnx.AttributeProto:
    a = onnx.AttributeProto()
    a.name, a.type = name, onnx.AttributeProto.INTS
    return a


def _both_modes_agree(m: onnx.ModelProto, x: np.ndarray) -> None:
    """prepare_model raises nothing but ModelError in either mode; the integer session refuses (at creation or run)
    exactly when the default one does, and otherwise gives outputs of the same shapes."""
    results = []
    for integer in (False, True):
        try:
            sess = ortquant.InferenceSession(m, integer=integer)
            results.append(("ran", [y.shape for y in sess.run(None, {"x": x})]))
        except (ModelError, *ORT_ERRORS) as e:
            results.append(("refused", type(e).__name__))
    assert results[0][0] == results[1][0], results
    if results[0][0] == "ran":
        assert results[0][1] == results[1][1], results


CONV_X = np.random.default_rng(11).standard_normal((2, 4, 9, 9)).astype(np.float32)


@pytest.mark.parametrize(
    "node,attr,reason",
    [
        ("bn", helper.make_attribute("epsilon", "1e-3"), None),  # the BN stays: onnxruntime refuses its attribute
        ("bn", helper.make_attribute("epsilon", [1, 2]), None),
        ("q_xq", helper.make_attribute("signed", "1"), "attribute 'signed' must be INT, got STRING"),
        ("q_xq", helper.make_attribute("narrow", [0]), "attribute 'narrow' must be INT, got INTS"),
        ("q_xq", helper.make_attribute("narrow", 2), "attribute 'narrow' must be 0 or 1"),
        ("q_xq", helper.make_attribute("rounding_mode", b"RO\xffND"), "'rounding_mode' is not valid UTF-8"),
        ("conv", _empty_ints("kernel_shape"), "Conv node 'conv'"),
        ("conv", _empty_ints("strides"), "Conv node 'conv'"),
        ("conv", _empty_ints("dilations"), "Conv node 'conv'"),
        ("conv", helper.make_attribute("strides", 2), "Conv node 'conv'"),
    ],
)
def test_malformed_attributes_leave_the_layer_to_onnxruntime(engine, node, attr, reason):
    """Attributes of the wrong type, empty lists, non-UTF-8 strings: no bare Python exception; the layer is not
    lowered (or the BatchNormalization not folded) and both modes end alike."""
    m, _ = _conv_model()
    _set_attr(_node(m, node), attr)
    (d,) = integer_plan(m)
    if reason is None:
        assert d.integer and "BatchNormalization" not in d.reason, d  # not folded: it stays a node
        assert "BatchNormalization" in [n.op_type for n in lower_integer(m).graph.node]
    else:
        assert not d.integer and reason in d.reason, d
    _both_modes_agree(m, CONV_X)


def test_gemm_alpha_and_beta_of_the_wrong_type(engine):
    for attr in (helper.make_attribute("alpha", "1"), helper.make_attribute("beta", [1.0, 2.0])):
        m = _gemm_model()
        _set_attr(_node(m, "fc"), attr)
        (d,) = integer_plan(m)
        assert not d.integer and "Gemm node 'fc'" in d.reason, d
        _both_modes_agree(m, np.ones((2, 3, 8, 8), np.float32))


@pytest.mark.parametrize("value", [-(2**63), 2, -1])
def test_gemm_trans_flags_other_than_0_or_1_stay_with_onnxruntime(engine, value):
    """transB = -2^63 is 0 to onnx's shape inference (32 bits) and true to onnxruntime's Gemm kernel: a session of
    the file is refused; a lowered layer would have run it. Any value but 0 or 1 leaves the layer to onnxruntime."""
    m = _gemm_model()
    _set_attr(_node(m, "fc"), helper.make_attribute("transB", value))
    (d,) = integer_plan(m)
    assert not d.integer and f"attribute 'transB' is {value}, not 0 or 1" in d.reason, d
    _both_modes_agree(m, np.ones((2, 3, 8, 8), np.float32))


def test_batchnorm_with_fewer_than_5_inputs_stays_a_node(engine):
    m, _ = _conv_model()
    del _node(m, "bn").input[4]
    (d,) = integer_plan(m)
    assert d.integer and "BatchNormalization" not in d.reason, d
    _both_modes_agree(m, CONV_X)


@pytest.mark.parametrize("keep", [1, 0])
def test_layer_with_too_few_inputs(engine, keep):
    m, _ = _conv_model(bn=False)
    del _node(m, "conv").input[keep:]
    (d,) = integer_plan(m)
    assert not d.integer and "inputs" in d.reason, d
    _both_modes_agree(m, CONV_X)


@pytest.mark.parametrize("param,value", [("ab", np.nan), ("ab", np.inf), ("az", np.nan), ("az", np.inf)])
def test_nan_or_inf_bit_width_or_zero_point(engine, param, value):
    m, _ = _conv_model()
    t = next(t for t in m.graph.initializer if t.name == param)
    t.CopyFrom(_init(param, value))
    (d,) = integer_plan(m)
    assert not d.integer, d
    _both_modes_agree(m, CONV_X)


@pytest.mark.parametrize(
    "shape,reason",
    [((0, 4, 3, 3), "no element"), ((6, 0, 3, 3), "no element"), ((6,), "1 dimensions"), ((), "0 dimensions")],
)
def test_empty_or_1d_weight(engine, shape, reason):
    m, _ = _conv_model(bn=False)
    t = next(t for t in m.graph.initializer if t.name == "w")
    t.CopyFrom(_init("w", np.ones(shape)))
    if shape and shape[0] != 6:  # the bias and the weight scale follow the output channels
        for name, n in (("cb", shape[0]), ("ws", shape[0])):
            i = next(t for t in m.graph.initializer if t.name == name)
            i.CopyFrom(_init(name, np.ones((n,) if name == "cb" else (n, 1, 1, 1))))
    (d,) = integer_plan(m)
    assert not d.integer and reason in d.reason, d
    _both_modes_agree(m, CONV_X)


def test_truncated_raw_data_is_named(engine):
    m, _ = _conv_model(bn=False)
    t = next(t for t in m.graph.initializer if t.name == "w")
    t.raw_data = t.raw_data[:-3]
    (d,) = integer_plan(m)
    assert not d.integer, d
    assert "Quant node 'q_wq'" in d.reason and "initializer 'w'" in d.reason and "raw data" in d.reason, d.reason
    with pytest.raises(ORT_ERRORS):  # onnxruntime refuses the tensor in both modes
        ortquant.InferenceSession(m, integer=True)


def test_external_data_outside_the_model_folder(engine):
    m, _ = _conv_model(bn=False)
    t = next(t for t in m.graph.initializer if t.name == "w")
    t.ClearField("raw_data")
    t.data_location = onnx.TensorProto.EXTERNAL
    e = t.external_data.add()
    e.key, e.value = "location", "../../outside.bin"
    (d,) = integer_plan(m)
    assert not d.integer and "external data" in d.reason, d


# ---- integer mode refuses what the float path refuses, with the same output shapes ----------------------------


def _gemm_on(shape: tuple[int | str, ...]) -> onnx.ModelProto:
    """x (of ``shape``) -> Quant -> Gemm(48 -> 10) <- Quant(W)."""
    m = _gemm_model(flatten=False)
    dims = m.graph.input[0].type.tensor_type.shape
    dims.Clear()
    for s in shape:
        d = dims.dim.add()
        if isinstance(s, str):
            d.dim_param = s
        else:
            d.dim_value = s
    return m


def test_activation_scale_that_does_not_broadcast_is_not_per_tensor(engine):
    """A scale of shape (4,) (all equal) on a [N, 48] activation: the float Quant cannot broadcast it; integer mode
    must not take it as one value."""
    m = _gemm_on(("N", 48))
    next(t for t in m.graph.initializer if t.name == "as").CopyFrom(_init("as", [0.05] * 4))
    (d,) = integer_plan(m)
    assert not d.integer and "does not broadcast" in d.reason, d
    _both_modes_agree(m, np.ones((2, 48), np.float32))


def test_activation_scale_that_broadcasts_is_per_tensor(engine):
    m = _gemm_on(("N", 48))
    next(t for t in m.graph.initializer if t.name == "as").CopyFrom(_init("as", [[0.05]]))
    (d,) = integer_plan(m)
    assert d.integer, d


@pytest.mark.parametrize("shape", [(2, 3, 48), (48,)])
def test_gemm_on_an_activation_that_is_not_2d(engine, shape):
    """onnxruntime's Gemm refuses a 3-D A and makes a 1-D A a row ([1, N]); QGemm would return [2, 3, N] and [N]."""
    m = _gemm_on(shape)
    (d,) = integer_plan(m)
    assert not d.integer and "rank" in d.reason, d
    _both_modes_agree(m, np.ones(shape, np.float32))


def test_conv_bias_of_shape_n_by_1_is_not_flattened(engine):
    m, _ = _conv_model(bn=False)
    next(t for t in m.graph.initializer if t.name == "cb").CopyFrom(_init("cb", np.ones((6, 1))))
    (d,) = integer_plan(m)
    assert not d.integer and "bias" in d.reason, d
    _both_modes_agree(m, CONV_X)


def test_folded_relu_with_an_unknown_attribute_stays(engine):
    """A node integer mode would fold away must be one onnxruntime accepts (it never sees the folded node)."""
    m, _ = _conv_model()
    _set_attr(_node(m, "relu"), helper.make_attribute("momentum", 0.5))
    assert [n.op_type for n in lower_integer(m).graph.node][-1] == "Relu"
    _both_modes_agree(m, CONV_X)


# ---- errors name the user's node ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend_name", ["engine", "float"])
def test_run_time_errors_name_the_users_layer(monkeypatch, backend_name):
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", backend_name)
    m = _gemm_on(("N", "K"))
    low = lower_integer(m)
    assert "fc" in [n.name for n in low.graph.node]
    sess = ortquant.InferenceSession(m, integer=True)
    with pytest.raises(ORT_ERRORS) as e:
        sess.run(None, {"x": np.ones((2, 47), np.float32)})  # 47 features, the weight takes 48
    assert "'fc'" in str(e.value), str(e.value)  # QGemm node 'fc' / MatMul node. Name:'fc'
    assert "_integer" not in str(e.value) and "__int" not in str(e.value), str(e.value)


def test_unnamed_layer_takes_its_first_output_as_name(engine):
    m, _ = _conv_model(bn=False)
    _node(m, "conv").name = ""
    (d,) = integer_plan(m)
    assert d.node == "c"
    qconv = next(n for n in lower_integer(m).graph.node if n.op_type == "QConv")
    assert qconv.name == "c"


def test_replayed_pass_through_nodes_keep_their_names(engine):
    m = _gemm_model()
    names = [n.name for n in lower_integer(m).graph.node]
    assert names == ["pool", "flat", "fc"], names


def test_gemm_rank_comes_from_the_graph_input_not_from_value_info(engine):
    """A value_info that declares the quantizer's output [1, 48] while the graph input is [48] (onnxruntime does not
    enforce value_info): the Gemm's A is 1-D, so integer mode must leave it to onnxruntime ([1, 10] there)."""
    m = _gemm_on((48,))
    m.graph.value_info.append(helper.make_tensor_value_info("xq", TensorProto.FLOAT, [1, 48]))
    (d,) = integer_plan(m)
    assert not d.integer and "rank 1" in d.reason, d
    _both_modes_agree(m, np.ones(48, np.float32))


def test_conv_geometry_beyond_qconv_limits_stays_float(engine):
    """A stride of 2^31 runs on onnxruntime's Conv; QConv refuses it: the layer stays on the float path."""
    m, _ = _conv_model(bn=False)
    _set_attr(_node(m, "conv"), helper.make_attribute("strides", [1 << 31, 1]))
    (d,) = integer_plan(m)
    assert not d.integer and "QConv's limits" in d.reason, d
    _both_modes_agree(m, CONV_X)


def test_a_quantizer_nobody_read_before_stays(engine):
    """Only the quantizers the lowering leaves unread go: one nobody read in the model stays, so that the default
    mode's checks (here: the weight-quantizer folding refuses its bit width) apply in integer mode too."""
    m = _gemm_model()
    m.graph.initializer.append(_init("bad_bits", 100, np.int32))
    m.graph.node.insert(0, _quant("w", "unread", "ws", "wz", "bad_bits", signed=1, narrow=0))
    assert "q_unread" in [n.name for n in lower_integer(m).graph.node]
    for integer in (False, True):
        with pytest.raises(ORT_ERRORS, match="q_unread"):
            ortquant.prepare_model(m, integer=integer)


@pytest.mark.parametrize("c_in,planes", [(8, "two"), (64, "three")])
def test_conv_reading_the_previous_conv_sum(backend, c_in, planes):
    """Conv -> Conv with no quantizer between (power-of-two scales, per-channel weights, padding): the second layer
    reads the first one's sum plus bias on its grid, per channel, as the per-tensor grid of the finest scale (16 bits
    with 8 input channels, 19 with 64: two or three byte planes), both lowered, bit for bit the exact integer
    reference."""
    rng = np.random.default_rng(c_in)
    ws1 = 2.0 ** rng.integers(-4, -1, (4, 1, 1, 1))
    inits = [
        _init("as", 0.125), _init("az", 0.0), _init("ab", 4.0), _init("wz", 0.0), _init("wb", 4.0),
        _init("w1", rng.uniform(-1, 1, (4, c_in, 3, 3))), _init("ws1", ws1),
        _init("w2", rng.uniform(-4, 4, (3, 4, 3, 3))), _init("ws2", 0.5),
        _init("b1", rng.uniform(-2, 2, 4)), _init("bs", 0.25),
    ]  # fmt: skip
    nodes = [
        _quant("x", "xq", "as", "az", "ab", signed=0),
        _quant("w1", "w1q", "ws1", "wz", "wb", signed=1, narrow=1),
        _quant("w2", "w2q", "ws2", "wz", "wb", signed=1, narrow=1),
        _quant("b1", "b1q", "bs", "wz", "wb", signed=1),
        helper.make_node("Conv", ["xq", "w1q", "b1q"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "w2q"], ["y"], name="conv2", pads=[1, 0, 1, 0]),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c_in, 6, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    d1, d2 = integer_plan(m)
    assert d1.integer and d2.integer, (d1, d2)
    if backend != "float":
        assert d2.reason.startswith(f"QConv (int8 engine on {planes} byte planes); activation on the grid"), d2
    x = rng.uniform(-0.2, 2.2, (2, c_in, 6, 5)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    # the reference: codes, exact int64 sums, the layer sums' grid 2^-3 * ws1 (bias: 0.25 = 2^-3 * ws1 * r)
    v = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in inits}
    a = iref.act_codes(x, scale=0.125, bits=4, signed=False)
    w1 = np.clip(np.rint(v["w1"] / ws1), -7, 7).astype(np.int64)
    w2 = np.clip(np.rint(v["w2"] / 0.5), -7, 7).astype(np.int64)
    b1 = np.clip(np.rint(v["b1"] / 0.25), -8, 7) * 0.25
    s1 = 0.125 * ws1.reshape(1, 4, 1, 1)
    acc1 = iref.conv_int(a, w1, (1, 1), (1, 1, 1, 1), (1, 1), 1)
    c1 = acc1 + np.rint(b1.reshape(1, 4, 1, 1) / s1).astype(np.int64)  # codes of conv1's output on its grid
    y1 = (c1 * s1).astype(np.float32)  # exact: power-of-two scales, codes below 2^24
    # conv2 reads y1 as a per-tensor grid: its finest scale with codes y1 / s_min (per-channel s1 is a multiple)
    s_min = float(s1.min())
    a2 = np.rint(y1.astype(np.float64) / s_min).astype(np.int64)
    acc2 = iref.conv_int(a2, w2, (1, 1), (1, 0, 1, 0), (1, 1), 1)
    want = iref.rescale(acc2, np.full(3, s_min * 0.5), np.zeros(3), 1)
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def _rank3_matmul_bn_model(t: int) -> onnx.ModelProto:
    """x [N, t, 4] -> Quant(act) -> MatMul(W [4, 4] <- Quant) -> BatchNormalization with 4 parameters per input
    (onnxruntime reads them as the t channels of axis 1, the rows: t = 4 runs, t = 1 is refused)."""
    rng = np.random.default_rng(21)
    p = {
        "w": rng.standard_normal((4, 4)).astype(np.float32) * 0.3,
        "ws": np.float32(0.05),
        "wz": np.float32(0),
        "wb": np.float32(4),
        "as": np.float32(0.1),
        "az": np.float32(0),
        "ab": np.float32(4),
        "gamma": (0.5 + rng.random(4)).astype(np.float32),
        "beta": rng.standard_normal(4).astype(np.float32),
        "mean": rng.standard_normal(4).astype(np.float32),
        "var": (0.5 + rng.random(4)).astype(np.float32),
    }
    nodes = [
        _quant("x", "xq", "as", "az", "ab", signed=1, narrow=0, rounding_mode="ROUND"),
        _quant("w", "wq", "ws", "wz", "wb", signed=1, narrow=1, rounding_mode="ROUND"),
        helper.make_node("MatMul", ["xq", "wq"], ["mm"], name="mm"),
        helper.make_node("BatchNormalization", ["mm", "gamma", "beta", "mean", "var"], ["y"], name="bn"),
    ]
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, t, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[_init(k, v) for k, v in p.items()],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("t", [4, 1])
def test_batchnorm_after_a_rank3_matmul_is_not_folded(engine, t):
    """BatchNormalization normalizes axis 1, the rows of a rank-3 MatMul output, not its output channels (the last
    axis): it must stay a node even when its parameter count equals the channel count (t = 4), and integer mode
    must give the default mode's values (t = 4) or refuse as it does (t = 1: 4 parameters for 1 channel; folded,
    integer mode ran that model)."""
    m = _rank3_matmul_bn_model(t)
    (d,) = integer_plan(m)
    assert d.integer and "BatchNormalization" not in d.reason, d
    assert "BatchNormalization" in [n.op_type for n in lower_integer(m).graph.node]
    x = np.random.default_rng(3).standard_normal((2, t, 4)).astype(np.float32)
    if t == 1:
        _both_modes_agree(m, x)
        return
    want = ortquant.InferenceSession(m).run(None, {"x": x})[0]
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_batchnorm_after_a_matmul_of_unknown_rank_is_folded_with_a_rank_check(engine):
    """X's rank unknown (no declared shape): the BatchNormalization is folded into the QGemm with x_rank = 2. A 2-D
    input gives the default mode's values; a rank-3 one is refused by name (the default mode normalizes its axis 1
    instead, or refuses it when that axis does not have 4 entries)."""
    m = _rank3_matmul_bn_model(4)
    del m.graph.input[0].type.tensor_type.shape.dim[:]
    m.graph.input[0].type.tensor_type.ClearField("shape")
    (d,) = integer_plan(m)
    assert d.integer and "BatchNormalization folded" in d.reason, d
    (q,) = [n for n in lower_integer(m).graph.node if n.op_type == "QGemm"]
    assert [a.i for a in q.attribute if a.name == "x_rank"] == [2]
    x2 = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    want = ortquant.InferenceSession(m).run(None, {"x": x2})[0]
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x2})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    sess = ortquant.InferenceSession(m, integer=True)
    for shape in ((2, 4, 4), (2, 1, 4)):
        with pytest.raises(ORT_ERRORS, match=r"input X of shape \(2, \d, 4\) must have rank 2 \(attribute 'x_rank'"):
            sess.run(None, {"x": np.zeros(shape, np.float32)})


def _qgemm_op(x_rank: int, flatten: int | None = None) -> onnx.ModelProto:
    extra = {} if flatten is None else {"flatten": flatten}
    return _integer_fixtures.qgemm_model(np.ones((3, 6)), x_rank=x_rank, **extra)


def test_qgemm_x_rank_checks_the_input_as_read():
    x = np.full((2, 6), 0.5, np.float32)
    (y,) = _integer_fixtures.registered_session(_qgemm_op(2)).run(None, {"x": x})
    np.testing.assert_allclose(y, np.full((2, 3), 6 * 10 * 0.01))  # codes round(0.5 / 0.05) = 10
    with pytest.raises(ORT_ERRORS, match=r"QGemm node 'fc'.*input X of shape \(1, 2, 6\) must have rank 2"):
        _integer_fixtures.registered_session(_qgemm_op(2)).run(None, {"x": x[None]})
    (y,) = _integer_fixtures.registered_session(_qgemm_op(3)).run(None, {"x": x[None]})
    assert y.shape == (1, 2, 3)
    # with flatten, X is read 2-D whatever its rank
    (y,) = _integer_fixtures.registered_session(_qgemm_op(2, flatten=1)).run(None, {"x": x.reshape(2, 2, 3)})
    assert y.shape == (2, 3)
    for bad in (-1, 65):
        with pytest.raises(ORT_ERRORS, match=r"attribute 'x_rank' must be a rank in 1\.\.64 or 0"):
            _integer_fixtures.registered_session(_qgemm_op(bad))


def test_bipolar_activation_scale_of_an_integer_type_stays_with_onnxruntime(engine):
    """BipolarQuant's schema takes float scales only: with an int8 scale onnxruntime refuses the default-mode session,
    and integer mode must not fold the quantizer away and run it (it stays a node, refused alike)."""
    from pathlib import Path

    models = Path(__file__).resolve().parents[2] / "models"
    m = onnx.load(str(models / "tfc_w1a1.onnx"))
    (t,) = [t for t in m.graph.initializer if t.name == "BipolarQuant_5_param0"]  # Gemm_1's activation scale
    t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.int8), t.name))
    plan = {d.node: d for d in integer_plan(m)}
    assert "BipolarQuant_5" in [n.name for n in lower_integer(m).graph.node], plan["Gemm_1"]
    x = np.load(models / "tfc_w1a1.npz")["input_b4"]
    for integer in (False, True):
        with pytest.raises(ORT_ERRORS, match=r"tensor\(int8\).*BipolarQuant_5"):
            ortquant.InferenceSession(m, integer=integer).run(None, {"global_in": x})
