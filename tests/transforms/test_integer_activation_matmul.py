"""Integer mode's product of two quantized activations (``transforms/lower_integer.py``, attention's MatMuls on the
float-exact backend): Quant(a) x Quant(b) runs as QuantCodes -> onnxruntime's MatMul on the integer values ->
Rescale by the product of the two scales, where float32 adds every product exactly. The expected outputs come from
numpy's int64 product of the two quantizers' codes and the integer reference's rescale, independent of the
transform; the models run through ``ortquant.InferenceSession``."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from onnx import TensorProto, helper

import ortquant
from ortquant.reference import integer as iref
from ortquant.transforms.lower_integer import integer_plan

Q = "qonnx.custom_op.general"


def _attention(t: int, d: int, bits: tuple[int, int, int], *, transpose: bool = True) -> onnx.ModelProto:
    """scores = Quant(q) x Transpose(Quant(k)) (or Quant(kt) as given); out = Quant(Softmax(scores)) x Quant(v)."""
    qb, kb, pb = bits
    inits = [
        _init("sq", 0.05), _init("sk", 0.0625), _init("sv", 0.04), _init("sp", 1 / 255), _init("z", 0.0),
        _init("bq", qb), _init("bk", kb), _init("bp", pb), _init("bv", 8),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Quant", ["q", "sq", "z", "bq"], ["qq"], domain=Q, signed=1),
        helper.make_node("Quant", ["k", "sk", "z", "bk"], ["kq"], domain=Q, signed=1),
        helper.make_node("Quant", ["v", "sv", "z", "bv"], ["vq"], domain=Q, signed=1),
    ]
    if transpose:
        nodes.append(helper.make_node("Transpose", ["kq"], ["kt"], perm=[0, 2, 1]))
    nodes += [
        helper.make_node("MatMul", ["qq", "kt" if transpose else "kq"], ["scores"], name="scores"),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("Quant", ["p", "sp", "z", "bp"], ["pq"], domain=Q, signed=0),
        helper.make_node("MatMul", ["pq", "vq"], ["out"], name="context"),
    ]
    kshape = ["b", t, d] if transpose else ["b", d, t]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("q", TensorProto.FLOAT, ["b", t, d]),
         helper.make_tensor_value_info("k", TensorProto.FLOAT, kshape),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, ["b", t, d])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, None)],
        initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _softmax(x: np.ndarray) -> np.ndarray:
    """onnxruntime's own Softmax (the one the model runs between the two products) on x."""
    import onnxruntime as ort

    g = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], "s",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 10
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


def _want(feeds: dict[str, np.ndarray], bits: tuple[int, int, int], transpose: bool) -> tuple[np.ndarray, np.ndarray]:
    qb, kb, pb = bits
    a = iref.act_codes(feeds["q"], 0.05, 0.0, qb, True)
    kc = iref.act_codes(feeds["k"], 0.0625, 0.0, kb, True)
    kc = kc.transpose(0, 2, 1) if transpose else kc
    acc = np.matmul(a.astype(np.int64), kc.astype(np.int64))
    n = acc.shape[-1]
    s = np.full(n, np.float64(np.float32(0.05)) * np.float64(np.float32(0.0625)))
    scores = iref.rescale(acc, s, np.zeros(n), -1)
    p = _softmax(scores)
    pc = iref.act_codes(p, float(np.float32(1 / 255)), 0.0, pb, False)
    vc = iref.act_codes(feeds["v"], 0.04, 0.0, 8, True)
    acc2 = np.matmul(pc.astype(np.int64), vc.astype(np.int64))
    s2 = np.full(acc2.shape[-1], np.float64(np.float32(1 / 255)) * np.float64(np.float32(0.04)))
    return iref.rescale(acc2, s2, np.zeros(acc2.shape[-1]), -1), scores


@pytest.mark.parametrize("transpose", [True, False], ids=["keys-transposed", "keys-given-transposed"])
def test_attention_products_are_exact_integer_sums(transpose: bool) -> None:
    t, d, bits = 12, 16, (8, 8, 8)
    m = _attention(t, d, bits, transpose=transpose)
    plan = {p.node: p for p in integer_plan(m)}
    assert plan["scores"].integer and "MatMul on integer values (float-exact)" in plan["scores"].reason, plan
    assert plan["context"].integer, plan
    ops = [n.op_type for n in ortquant.prepare_model(m, integer=True).graph.node]
    # the keys' Quant stays where a Transpose reads it (that operand is then read on its grid)
    assert ops.count("Quant") == int(transpose) and ops.count("QuantCodes") == 4 and ops.count("Rescale") == 2, ops
    rng = np.random.default_rng(3)
    kshape = (2, t, d) if transpose else (2, d, t)
    feeds = {"q": rng.standard_normal((2, t, d)).astype(np.float32),
             "k": rng.standard_normal(kshape).astype(np.float32),
             "v": rng.standard_normal((2, t, d)).astype(np.float32)}  # fmt: skip
    out, scores = ortquant.InferenceSession(m, integer=True).run(None, feeds)
    want_out, want_scores = _want(feeds, bits, transpose)
    np.testing.assert_array_equal(scores.view(np.uint32), want_scores.view(np.uint32))
    np.testing.assert_array_equal(out.view(np.uint32), want_out.view(np.uint32))


def test_products_float32_cannot_add_exactly_stay_float() -> None:
    """K = 1100 of two 8-bit codes: sums up to 1100 * 128 * 128 > 2^24."""
    m = _attention(4, 1100, (8, 8, 8))
    plan = {p.node: p for p in integer_plan(m)}
    assert not plan["scores"].integer and "float32 would not add it exactly" in plan["scores"].reason, plan


def test_the_engine_backend_alone_leaves_them_float(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", "engine")
    plan = {p.node: p for p in integer_plan(_attention(4, 8, (8, 8, 8)))}
    assert not plan["scores"].integer and "float-exact backend only" in plan["scores"].reason, plan


def test_an_unquantized_operand_keeps_the_float_path() -> None:
    m = _attention(4, 8, (8, 8, 8))
    q = next(n for n in m.graph.node if n.output[0] == "qq")
    m.graph.node.remove(q)
    m.graph.node.insert(0, helper.make_node("Identity", ["q"], ["qq"]))
    plan = {p.node: p for p in integer_plan(m)}
    assert not plan["scores"].integer and "produced by Identity" in plan["scores"].reason, plan
    assert plan["context"].integer, plan
