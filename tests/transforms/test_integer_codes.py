"""Integer mode's int8 codes between layers (``transforms/integer_codes.py``, the op ``QConvCodes``): a lowered
convolution read only by lowered convolutions with one input quantizer writes their codes, and they read them. The
expected outputs come from a numpy chain of the integer reference (act codes, an int64 convolution, one float64
rescale per layer), independent of the transform and the ops; the models run through ``ortquant.InferenceSession``
in the test process, as a user's would (no schema or library set up beforehand)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms.integer_codes import fuse_integer_codes

Q = "qonnx.custom_op.general"


def _layer(seed: int, c: int, m: int, k: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w": (rng.standard_normal((m, c, k, k)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((m, 1, 1, 1)) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(4),
        "as": np.float32(0.03 + 0.01 * seed),
        "az": np.float32(0),
        "ab": np.float32(4),
        "cb": (rng.standard_normal(m) * 0.1).astype(np.float32),
    }


def _reference(x: np.ndarray, p: dict[str, np.ndarray], signed: bool, pads: int, stride: int, pool: int,
               relu: bool) -> np.ndarray:  # fmt: skip
    """One layer: act codes of Quant(x) (4 bits), an int64 convolution of the weight codes, the float64 rescale
    (with the Relu), then a max pool of window and stride ``pool``."""
    from ortquant.reference import integer as iref
    from ortquant.reference import qonnx as qref

    wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    a = iref.act_codes(x, float(p["as"]), 0.0, 4, signed)
    ap = np.pad(a, ((0, 0), (0, 0), (pads, pads), (pads, pads)))
    k = codes.shape[2]
    oh, ow = (ap.shape[2] - k) // stride + 1, (ap.shape[3] - k) // stride + 1
    acc = np.zeros((a.shape[0], codes.shape[0], oh, ow), np.int64)
    for i in range(k):
        for j in range(k):
            win = ap[:, :, i : i + stride * (oh - 1) + 1 : stride, j : j + stride * (ow - 1) + 1 : stride]
            acc += np.einsum("nchw,mc->nmhw", win, codes[:, :, i, j])
    s = np.float64(p["as"]) * p["ws"].reshape(-1).astype(np.float64)
    y = iref.rescale(acc, s, p["cb"].astype(np.float64), 1, relu=relu)
    return _reference_pool(y, pool)


def _reference_pool(y: np.ndarray, pool: int) -> np.ndarray:
    if pool > 1:
        n, m, h, w = y.shape
        y = y[:, :, : h // pool * pool, : w // pool * pool].reshape(n, m, h // pool, pool, w // pool, pool).max((3, 5))
    return y


def _chain(
    layers: list[dict], c: int, h: int, w: int, *, also_output: str | None = None
) -> tuple[onnx.ModelProto, list[dict[str, np.ndarray]]]:
    """x -> [Quant -> Conv (-> Relu) (-> MaxPool)] per layer; a layer dict: m, k, pads, stride, pool, relu, signed,
    and "reads" (the index of the layer whose output it reads; default the previous one)."""
    nodes, inits, params, outs = [], [], [], []
    chans = [c]
    for i, spec in enumerate(layers):
        src_i = spec.get("reads", i - 1)
        src = "x" if src_i < 0 else outs[src_i]
        p = _layer(i + 3, chans[src_i + 1], spec["m"], spec["k"])
        params.append(p)
        f = f"_{i}"
        inits += [_init(key + f, v) for key, v in p.items()]
        nodes += [
            helper.make_node("Quant", [src, "as" + f, "az" + f, "ab" + f], ["xq" + f], name="aquant" + f, domain=Q,
                             signed=int(spec.get("signed", False))),
            helper.make_node("Quant", ["w" + f, "ws" + f, "wz" + f, "wb" + f], ["wq" + f], name="wquant" + f,
                             domain=Q, signed=1, narrow=1),
            helper.make_node("Conv", ["xq" + f, "wq" + f, "cb" + f], ["c" + f], name="conv" + f,
                             pads=[spec.get("pads", 1)] * 4, strides=[spec.get("stride", 1)] * 2,
                             kernel_shape=[spec["k"]] * 2),
        ]  # fmt: skip
        out = "c" + f
        if spec.get("leaky"):
            nodes.append(helper.make_node("LeakyRelu", [out], ["l" + f], name="leaky" + f, alpha=spec["leaky"]))
            out = "l" + f
        elif spec.get("relu", True):
            nodes.append(helper.make_node("Relu", [out], ["r" + f], name="relu" + f))
            out = "r" + f
        if spec.get("pool", 1) > 1:
            q = spec["pool"]
            nodes.append(helper.make_node("MaxPool", [out], ["p" + f], name="pool" + f, kernel_shape=[q, q],
                                          strides=[q, q]))  # fmt: skip
            out = "p" + f
        outs.append(out)
        chans.append(spec["m"])
    read = {layer.get("reads", i - 1) for i, layer in enumerate(layers)}
    finals = [o for i, o in enumerate(outs) if i not in read]
    if also_output:
        finals.append(also_output)
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, h, w])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in finals],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, params


def _expected(layers: list[dict], params: list[dict], x: np.ndarray) -> list[np.ndarray]:
    ys: list[np.ndarray] = []
    for i, (spec, p) in enumerate(zip(layers, params, strict=True)):
        src_i = spec.get("reads", i - 1)
        src = x if src_i < 0 else ys[src_i]
        leaky = spec.get("leaky")
        y = _reference(src, p, spec.get("signed", False), spec.get("pads", 1), spec.get("stride", 1),
                       1 if leaky else spec.get("pool", 1), spec.get("relu", True) and not leaky)  # fmt: skip
        if leaky:  # onnxruntime's LeakyRelu: y >= 0 ? y : alpha * y in float32 (then the pool)
            y = np.where(y >= 0, y, np.float32(leaky) * y).astype(np.float32)
            y = _reference_pool(y, spec.get("pool", 1))
        ys.append(y)
    return ys


def _ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in ortquant.prepare_model(m, integer=True).graph.node]


CASES = {
    # unit-stride 3x3 layers (the channel-quad path), codes out of the first into the second
    "quads": ([{"m": 8, "k": 3}, {"m": 8, "k": 3, "relu": False}], 8, 9, 10),
    # a stride-2 reader (its quad planes take every other row and column of the codes)
    "strided": ([{"m": 8, "k": 3}, {"m": 8, "k": 1, "pads": 0, "stride": 2}], 4, 12, 14),
    # a producer with a fused max pool (codes of the pooled image)
    "pooled": ([{"m": 8, "k": 3, "pool": 2}, {"m": 4, "k": 3}], 4, 12, 12),
    # a signed reader with pads (its codes carry an offset: explicit padding with the code of 0)
    "signed_padded": ([{"m": 8, "k": 3, "relu": False}, {"m": 8, "k": 3, "signed": True}], 4, 9, 9),
    # outputs larger than 1 MiB of sums: both layers run in bands of rows (no pads: the engine pads nothing)
    "bands": ([{"m": 16, "k": 3, "pads": 0}, {"m": 16, "k": 3, "pads": 0}], 4, 150, 150),
    # a fused LeakyRelu before the codes (whole rows, and banded) and before a pool; signed readers (an unsigned
    # quantizer would clamp the negative values the LeakyRelu keeps)
    "leaky": ([{"m": 8, "k": 3, "leaky": 0.5}, {"m": 8, "k": 3, "relu": False, "signed": True}], 8, 9, 10),
    "leaky_bands": (
        [{"m": 16, "k": 3, "pads": 0, "leaky": 0.5}, {"m": 16, "k": 3, "pads": 0, "signed": True}],
        4,
        150,
        150,
    ),
    "leaky_pooled": ([{"m": 8, "k": 3, "leaky": 0.5, "pool": 2}, {"m": 4, "k": 3, "signed": True}], 4, 12, 12),
    # rows longer than the op's 2048-value buffer: each row in pieces
    "long_rows": ([{"m": 4, "k": 3, "leaky": 0.5}, {"m": 4, "k": 3, "signed": True}], 4, 3, 2200),
    # one producer, two readers with the same quantizer
    "two_readers": ([{"m": 8, "k": 3}, {"m": 4, "k": 3}, {"m": 4, "k": 1, "pads": 0, "reads": 0}], 4, 8, 8),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_codes_between_layers_match_the_reference(case):
    layers, c, h, w = CASES[case]
    if case == "two_readers":  # the third layer reads the first's output through the same Quant node
        m, params = _chain(layers, c, h, w)
        for n in m.graph.node:
            if n.name == "aquant_2":
                n.input[:] = ["r_0", "as_1", "az_1", "ab_1"]
        params[2] = {**params[2], "as": params[1]["as"]}
    else:
        m, params = _chain(layers, c, h, w)
    ops = _ops(m)
    assert ops.count("QConvCodes") == 1, ops
    x = (np.random.default_rng(7).standard_normal((2, c, h, w)) * 0.6).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})
    want = [y for i, y in enumerate(_expected(layers, params, x)) if i > 0]
    assert len(got) == len(want)
    for g, e in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, e)


def test_a_value_also_read_as_float_stays_float():
    layers = [{"m": 8, "k": 3}, {"m": 8, "k": 3}]
    m, _ = _chain(layers, 4, 8, 8, also_output="r_0")
    assert "QConvCodes" not in _ops(m)


def test_readers_with_different_quantizers_stay_float():
    layers = [{"m": 8, "k": 3}, {"m": 4, "k": 3}, {"m": 4, "k": 3, "reads": 0}]
    m, _ = _chain(layers, 4, 8, 8)
    assert "QConvCodes" not in _ops(m)
    prepared = ortquant.prepare_model(m, integer=True)
    assert fuse_integer_codes(prepared) is prepared


def test_qconv_codes_without_its_output_quantizer_is_a_clear_error():
    m, _ = _chain([{"m": 8, "k": 3}, {"m": 8, "k": 3}], 4, 8, 8)
    prepared = ortquant.prepare_model(m, integer=True)
    node = next(n for n in prepared.graph.node if n.op_type == "QConvCodes")
    kept = [a for a in node.attribute if not a.name.startswith("out_act_")]
    del node.attribute[:]
    node.attribute.extend(kept)
    with pytest.raises(Exception, match=r"QConvCodes needs the attributes 'out_act_\*'"):
        ortquant.InferenceSession(prepared)


def _residual_block(signed: bool) -> tuple[onnx.ModelProto, list[dict[str, np.ndarray]]]:
    """x -> Quant -> Conv -> Relu -> r0 -> Quant (a1) -> q1 -> Conv -> c1; Add(c1, q1) -> Relu: Brevitas' residual
    pattern, the block's input quantizer shared by its first layer and its shortcut."""
    p0, p1 = _layer(3, 4, 8, 3), _layer(4, 8, 8, 3)
    inits = [_init(k + "_0", v) for k, v in p0.items()] + [_init(k + "_1", v) for k, v in p1.items()]
    mk = helper.make_node
    nodes = [
        mk("Quant", ["x", "as_0", "az_0", "ab_0"], ["xq"], name="aquant_0", domain=Q, signed=0),
        mk("Quant", ["w_0", "ws_0", "wz_0", "wb_0"], ["wq_0"], name="wquant_0", domain=Q, signed=1, narrow=1),
        mk("Conv", ["xq", "wq_0", "cb_0"], ["c0"], name="conv_0", pads=[1] * 4, kernel_shape=[3, 3]),
        mk("Relu", ["c0"], ["r0"], name="relu_0"),
        mk("Quant", ["r0", "as_1", "az_1", "ab_1"], ["q1"], name="aquant_1", domain=Q, signed=int(signed)),
        mk("Quant", ["w_1", "ws_1", "wz_1", "wb_1"], ["wq_1"], name="wquant_1", domain=Q, signed=1, narrow=1),
        mk("Conv", ["q1", "wq_1", "cb_1"], ["c1"], name="conv_1", pads=[1] * 4, kernel_shape=[3, 3]),
        mk("Add", ["c1", "q1"], ["s"], name="add"),
        mk("Relu", ["s"], ["y"], name="relu_out"),
    ]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4, 9, 10])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, [p0, p1]


@pytest.mark.parametrize("signed", [False, True])
def test_a_residual_quant_of_the_same_quantizer_reads_the_codes(signed):
    from ortquant.reference import qonnx as qref

    m, (p0, p1) = _residual_block(signed)
    prepared = ortquant.prepare_model(m, integer=True)
    ops = [n.op_type for n in prepared.graph.node]
    assert ops == ["QConvCodes", "QConv"], ops  # the shortcut's Quant is gone
    last = prepared.graph.node[1]
    assert last.input[4] == prepared.graph.node[0].output[0]
    assert any(a.name == "residual_act_scale" for a in last.attribute)
    x = (np.random.default_rng(9).standard_normal((2, 4, 9, 10)) * 0.6).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    y0 = _reference(x, p0, False, 1, 1, 1, True)
    q1 = qref.quant(y0, p1["as"], p1["az"], p1["ab"], signed=signed, narrow=False, rounding_mode="ROUND")
    c1 = _reference(y0, p1, signed, 1, 1, 1, False)
    want = np.maximum((c1 + q1).astype(np.float32), np.float32(0))
    np.testing.assert_array_equal(got, want)


def test_residual_codes_without_their_quantizer_is_a_clear_error():
    m, _ = _residual_block(False)
    prepared = ortquant.prepare_model(m, integer=True)
    node = prepared.graph.node[1]
    kept = [a for a in node.attribute if not a.name.startswith("residual_act_")]
    del node.attribute[:]
    node.attribute.extend(kept)
    x = np.zeros((1, 4, 9, 10), np.float32)
    with pytest.raises(Exception, match=r"input R is int8 codes but the attributes 'residual_act_\*'"):
        ortquant.InferenceSession(prepared).run(None, {"x": x})
