"""Integer mode's bias-Add fold (``transforms/integer_bias_add.py``): a constant bias ``Add`` (and a ``Relu``) after a
lowered MatMul / Gemm / Conv go into the op's ``B`` (and ``relu``), the form QKeras exports take. The expected outputs
come from the integer reference (act codes, int64 sums, ``float32(float64(acc) * S + (B + float64(bias)))``, numpy),
independent of the transform and the op; the models run through ``ortquant.InferenceSession`` as a user's would."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import qconv_params, qconv_reference
from onnx import TensorProto, helper

import ortquant
from ortquant.reference import integer as iref
from ortquant.reference import qonnx as qref
from ortquant.transforms.integer_chain import unchain

Q = "qonnx.custom_op.general"
K, N = 24, 10


def _dense_params(seed: int, k: int, n: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w": (rng.standard_normal((k, n)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((1, n)) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(4),
        "as": np.float32(0.05),
        "az": np.float32(0),
        "ab": np.float32(4),
    }


def _bias(kind: str, n: int, seed: int) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], str, np.ndarray]:
    """(nodes, initializers, the bias value's name, its float32 values [n]) of one way to write a bias."""
    b = (np.random.default_rng(seed).standard_normal(n) * 0.4).astype(np.float32)
    if kind == "quant":  # QKeras: a quantizer on a constant (the library evaluates it)
        yb = qref.quant(b, np.float32(2.0**-5), np.float32(0), np.float32(8), signed=True, narrow=False,
                        rounding_mode="ROUND")  # fmt: skip
        inits = [_init("b_raw", b), _init("b_s", 2.0**-5), _init("b_z", 0.0), _init("b_w", 8.0)]
        node = helper.make_node("Quant", ["b_raw", "b_s", "b_z", "b_w"], ["bias"], name="bquant", domain=Q, signed=1)
        return [node], inits, "bias", np.asarray(yb, np.float32)
    shape = {"1d": [n], "2d": [1, n], "2d_reshaped": [1, n], "scalar": [1]}[kind]
    v = b if kind != "scalar" else b[:1]
    return [], [_init("bias", v.reshape(shape))], "bias", np.broadcast_to(v, (n,)).astype(np.float32)


def _dense_model(op: str, bias: str, relu: bool, *, rows: int = 3) -> tuple[onnx.ModelProto, np.ndarray]:
    """Quant(x) -> MatMul / Gemm(Quant(w)) -> Add(bias) [-> Relu]; returns the model and the bias values."""
    p = _dense_params(5, K, N)
    bnodes, binits, bname, bvals = _bias(bias, N, 9)
    # 2d_reshaped: the layer's input comes through a Reshape (no declared rank: the rule infers it).
    reshape = bias == "2d_reshaped"
    nodes = [
        *([helper.make_node("Reshape", ["x0", "shape"], ["x"], name="reshape")] if reshape else []),
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node(op, ["xq", "wq"], ["y"], name="layer"),
        *bnodes,
        helper.make_node("Add", ["y", bname], ["z"], name="add"),
    ]
    out = "z"
    if relu:
        nodes.append(helper.make_node("Relu", ["z"], ["r"], name="relu"))
        out = "r"
    if reshape:
        binits = [*binits, _init("shape", [rows, K], np.int64)]
    x_in = helper.make_tensor_value_info(
        "x0" if reshape else "x", TensorProto.FLOAT, [rows * K] if reshape else [rows, K]
    )
    g = helper.make_graph(nodes, "g", [x_in], [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                          initializer=[*(_init(k, v) for k, v in p.items()), *binits])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, bvals


def _dense_reference(x: np.ndarray, p: dict[str, np.ndarray], bias: np.ndarray, relu: bool) -> np.ndarray:
    wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    a = iref.act_codes(x, float(p["as"]), 0.0, 4, False)
    acc = a.astype(np.int64) @ codes
    s = np.float64(p["as"]) * p["ws"].reshape(-1).astype(np.float64)
    y = (acc.astype(np.float64) * s + bias.astype(np.float64)).astype(np.float32)
    return np.where(y < 0, np.float32(0), y) if relu else y


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in unchain(ortquant.prepare_model(m, integer=True))]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias", ["1d", "2d", "2d_reshaped", "scalar", "quant"])
@pytest.mark.parametrize("op", ["MatMul", "Gemm"])
def test_dense_bias_add_goes_into_the_layer(op, bias, relu):
    m, bvals = _dense_model(op, bias, relu)
    ops = [o for o in _ops(m) if o != "Reshape"]
    assert ops == ["QGemm"], ops  # the Add, the Relu and the bias quantizer are gone
    x = (np.random.default_rng(1).standard_normal((3, K)) * 0.5).astype(np.float32)
    feed = {"x0": x.reshape(-1)} if bias == "2d_reshaped" else {"x": x}
    got = ortquant.InferenceSession(m, integer=True).run(None, feed)[0]
    np.testing.assert_array_equal(got, _dense_reference(x, _dense_params(5, K, N), bvals, relu))


def _conv_model(bias_shape: list[int], relu: bool, conv_bias: bool) -> tuple[onnx.ModelProto, dict, np.ndarray]:
    rng = np.random.default_rng(4)
    c = 6
    p = qconv_params(rng, c, c, [3, 3])  # the fixtures' layer: what qconv_reference reads
    b = (rng.standard_normal(c) * 0.3).astype(np.float32)
    if int(np.prod(bias_shape)) == 1:  # one value for every channel
        b = np.full(c, b[0], np.float32)
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "wq", *(["cb"] if conv_bias else [])], ["y"], name="conv", pads=[1] * 4,
                         kernel_shape=[3, 3]),
        helper.make_node("Add", ["bias", "y"], ["z"], name="add"),  # the constant first: either order folds
    ]  # fmt: skip
    out = "z"
    if relu:
        nodes.append(helper.make_node("Relu", ["z"], ["r"], name="relu"))
        out = "r"
    bias = b[: int(np.prod(bias_shape))].reshape(bias_shape)
    inits = [*(_init(k, v) for k, v in p.items() if conv_bias or k != "cb"), _init("bias", bias)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, c, 7, 9])],
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], initializer=inits)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, p, b


@pytest.mark.parametrize("conv_bias", [False, True])
@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("bias_shape", [[1, 6, 1, 1], [6, 1, 1], [1]])
def test_conv_bias_add_goes_into_the_layer(bias_shape, relu, conv_bias):
    m, p, b = _conv_model(bias_shape, relu, conv_bias)
    ops = _ops(m)
    assert ops == ["QConv"], ops
    x = (np.random.default_rng(2).standard_normal((2, 6, 7, 9)) * 0.5).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    cb = p["cb"].astype(np.float64) if conv_bias else np.zeros(6)
    bias = cb + b.astype(np.float64)  # B + float64(bias), as the contract
    want = qconv_reference(x, {**p, "cb": bias}, [3, 3], relu=relu)
    np.testing.assert_array_equal(got, want)


def test_a_bias_along_another_axis_stays_an_add():
    # [N, 1] against an [N, N] output varies along the rows, not the channels (as many values): not a layer bias.
    m, _ = _dense_model("MatMul", "1d", False, rows=N)
    init = next(t for t in m.graph.initializer if t.name == "bias")
    init.CopyFrom(_init("bias", np.linspace(-1, 1, N, dtype=np.float32).reshape(N, 1)))
    assert "Add" in _ops(m)
    x = (np.random.default_rng(1).standard_normal((N, K)) * 0.5).astype(np.float32)
    ortquant.InferenceSession(m, integer=True).run(None, {"x": x})  # still runs (onnxruntime's Add)


def test_an_add_of_two_values_stays():
    m, _ = _dense_model("MatMul", "1d", False)
    m.graph.initializer.remove(next(t for t in m.graph.initializer if t.name == "bias"))
    m.graph.input.append(helper.make_tensor_value_info("bias", TensorProto.FLOAT, [N]))
    assert "Add" in _ops(m)


def test_a_layer_output_read_elsewhere_keeps_its_add():
    m, _ = _dense_model("MatMul", "1d", True)
    m.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
    ops = _ops(m)
    assert "Add" in ops and "Relu" in ops


def test_a_relu_read_elsewhere_stays_but_the_add_folds():
    m, bvals = _dense_model("MatMul", "1d", True)
    m.graph.output.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    ops = _ops(m)
    assert "Add" not in ops and "Relu" in ops, ops
    x = (np.random.default_rng(1).standard_normal((3, K)) * 0.5).astype(np.float32)
    r, z = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})
    want = _dense_reference(x, _dense_params(5, K, N), bvals, False)
    np.testing.assert_array_equal(z, want)
    np.testing.assert_array_equal(r, np.maximum(want, 0))


def test_a_chain_of_dense_layers_then_writes_codes():
    # QKeras' MLP: MatMul -> Add(bias) -> Relu -> Quant -> MatMul ...: with the Add and Relu in the first layer, it
    # writes the second one's codes (integer_codes.py) and the graph is two integer ops.
    p1, p2 = _dense_params(5, K, N), _dense_params(6, N, 4)
    b1 = (np.random.default_rng(3).standard_normal(N) * 0.4).astype(np.float32)
    nodes = [
        helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=0),
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("MatMul", ["xq", "wq"], ["y"], name="mm1"),
        helper.make_node("Add", ["y", "b1"], ["z"], name="add1"),
        helper.make_node("Relu", ["z"], ["r"], name="relu1"),
        helper.make_node("Quant", ["r", "as2", "az", "ab"], ["rq"], name="aquant2", domain=Q, signed=0),
        helper.make_node("Quant", ["w2", "ws2", "wz", "wb"], ["wq2"], name="wquant2", domain=Q, signed=1, narrow=1),
        helper.make_node("MatMul", ["rq", "wq2"], ["out"], name="mm2"),
    ]
    inits = [*(_init(k, v) for k, v in p1.items()), _init("b1", b1), _init("w2", p2["w"]), _init("ws2", p2["ws"]),
             _init("as2", np.float32(0.1))]  # fmt: skip
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, K])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    assert _ops(m) == ["QGemmCodes", "QGemm"]
    x = (np.random.default_rng(8).standard_normal((5, K)) * 0.5).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    h = _dense_reference(x, p1, b1, True)
    want = _dense_reference(h, {**p2, "as": np.float32(0.1)}, np.zeros(4, np.float32), False)
    np.testing.assert_array_equal(got, want)


CORPUS = Path(os.environ.get("ORTQUANT_REALWORLD", Path(__file__).resolve().parents[2].parent / "shared" /
                             "conformance" / "realworld"))  # fmt: skip


def test_the_qkeras_jet_tagger_loses_its_bias_adds():
    # The published QKeras jet-tagging MLP (qonnx's converter): each lowered MatMul's bias Add and Relu go into it,
    # its activation quantizers (float64 power-of-two scales, int64 zero points 0) into the next layer, and the
    # layers exchange codes; the first layer reads the float input and stays float. Outputs against qonnx:
    # tests/realworld.
    path = CORPUS / "zoo_qkeras_jettagging.onnx"
    if not path.exists():
        pytest.skip(f"the real-world corpus is not at {CORPUS}")
    prepared = ortquant.prepare_model(str(path), integer=True)
    ops = [n.op_type for n in unchain(prepared)]
    assert ops == ["MatMul", "Add", "Relu", "QGemmCodes", "QGemmCodes", "QGemm", "Softmax"], ops
