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
from ortquant.transforms.integer_chain import unchain
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
    return [n.op_type for n in unchain(ortquant.prepare_model(m, integer=True))]


CASES = {
    # unit-stride 3x3 layers (the channel-quad path), codes out of the first into the second
    "quads": ([{"m": 8, "k": 3}, {"m": 8, "k": 3, "relu": False}], 8, 9, 10),
    # a stride-2 reader (its quad planes take every other row and column of the codes)
    "strided": ([{"m": 8, "k": 3}, {"m": 8, "k": 1, "pads": 0, "stride": 2}], 4, 12, 14),
    # stride-2 readers of codes with 16-pixel output rows (the kernel reads their quad planes in place): a 1x1 layer
    # (one phase of four) and a padded 3x3 one (all four phases, odd input width)
    "strided_1x1_rows16": ([{"m": 8, "k": 3}, {"m": 8, "k": 1, "pads": 0, "stride": 2}], 4, 32, 32),
    "strided_3x3_rows16": ([{"m": 8, "k": 3}, {"m": 4, "k": 3, "stride": 2}], 4, 32, 31),
    # a producer with a fused max pool (codes of the pooled image)
    "pooled": ([{"m": 8, "k": 3, "pool": 2}, {"m": 4, "k": 3}], 4, 12, 12),
    # planes of at least 256 values: the convolution writes codes and the codes are pooled (int8 pool rows of 11, 4
    # and 6 outputs: the 8- and 4-output steps and the scalar tail; a 3 x 3 window; a signed reader)
    "pooled_codes": ([{"m": 8, "k": 3, "pool": 2}, {"m": 4, "k": 3, "signed": True}], 4, 22, 22),
    "pooled_narrow": ([{"m": 8, "k": 3, "pool": 2}, {"m": 4, "k": 3}], 4, 32, 8),
    "pooled_3x3": ([{"m": 8, "k": 3, "pool": 3}, {"m": 4, "k": 3}], 4, 18, 18),
    "leaky_pooled_codes": ([{"m": 8, "k": 3, "leaky": 0.5, "pool": 2}, {"m": 4, "k": 3, "signed": True}], 4, 16, 20),
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
    (node,) = prepared.graph.node  # the two layers as one QChain: step 0's attributes are __0_*
    assert next(n.op_type for n in unchain(prepared)) == "QConvCodes"
    kept = [a for a in node.attribute if not a.name.startswith("__0_out_act_")]
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


# Dense layers: QGemm producers (QGemmCodes) and QGemm readers of int8 codes (MLPs, a CNN's Flatten -> Gemm head).


def _dense(seed: int, k: int, n: int, spec: dict) -> dict[str, np.ndarray]:
    """The initializers of one dense layer: weights (MatMul and Gemm without transB: [k, n]; Gemm with transB:
    [n, k]) with per-output scales (4-bit signed narrow; ``binary``: BipolarQuant weights of one scale), the
    input's activation quantizer and, for Gemm, a bias."""
    rng = np.random.default_rng(seed)
    trans = spec["op"] == "gemm"
    w_shape, s_shape = ((n, k), (n, 1)) if trans else ((k, n), (1, n))
    p = {
        "w": (rng.standard_normal(w_shape) * 0.3).astype(np.float32),
        "ws": np.float32(0.05) if spec.get("binary") else (0.01 + rng.random(s_shape) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(4),
        "as": np.float32(spec.get("scale", 0.03 + 0.01 * (seed % 5))),
        "az": np.float32(spec.get("zeropt", 0)),
        "ab": np.float32(spec.get("bits", 4)),
    }
    if spec["op"] != "matmul":
        p["cb"] = (rng.standard_normal(n) * 0.1).astype(np.float32)
    return p


def _dense_reference(x: np.ndarray, p: dict[str, np.ndarray], spec: dict) -> np.ndarray:
    """One dense layer: the integer reference's QGemm (act codes, an int64 product of the weight codes, the float64
    rescale with the Relu) on weight codes computed from the QONNX reference quantizer."""
    from ortquant.reference import integer as iref
    from ortquant.reference import qonnx as qref

    if spec.get("binary"):
        codes = np.where(p["w"] >= 0, 1, -1).astype(np.int64)
    else:
        wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
        codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    w_nk = codes if spec["op"] == "gemm" else codes.T
    n = w_nk.shape[0]
    s = np.float64(p["as"]) * np.broadcast_to(np.asarray(p["ws"], np.float64).reshape(-1), (n,))
    b = p["cb"].astype(np.float64) if "cb" in p else np.zeros(n)
    act: dict[str, object] = {"scale": float(p["as"])}
    if spec.get("bipolar"):
        act["bipolar"] = True
    else:
        act.update(zeropt=float(p["az"]), bits=int(p["ab"]), signed=bool(spec.get("signed", False)),
                   narrow=bool(spec.get("narrow", False)))  # fmt: skip
    return iref.qgemm(x, w_nk, s, b, relu=spec.get("relu", True), **act)


def _net(
    layers: list[dict], shape: list, *, also_output: int | None = None, side: int | None = None
) -> tuple[onnx.ModelProto, list[dict[str, np.ndarray]]]:
    """x (``shape``, "n" the batch) -> per layer: a convolution as in :func:`_chain` (op "conv": m, k, pads) or a
    dense layer (op "matmul", "gemm" (transB = 1) or "gemm_t0" (transB = 0): n, and the quantizer of its input:
    bits, signed, narrow, zeropt, scale, bipolar (BipolarQuant); binary: +-1 weights; flatten: "before" / "after" its
    activation Quant) with a Relu unless relu is False. "reads": the layer whose output it reads (default: the
    previous one); "same_act_as": take that layer's activation quantizer. ``side``: a Neg reads that layer's output
    (a graph output); ``also_output``: that layer's output is a graph output too."""
    nodes, inits, params, outs, shapes = [], [], [], [], []
    mk = helper.make_node
    for i, spec in enumerate(layers):
        src_i = spec.get("reads", i - 1)
        src = "x" if src_i < 0 else outs[src_i]
        in_shape = list(shape) if src_i < 0 else shapes[src_i]
        f = f"_{i}"
        if spec["op"] == "conv":
            p = _layer(i + 3, in_shape[1], spec["m"], spec["k"])
            pads = spec.get("pads", 1)
            nodes += [
                mk("Quant", [src, "as" + f, "az" + f, "ab" + f], ["xq" + f], name="aquant" + f, domain=Q,
                   signed=int(spec.get("signed", False))),
                mk("Quant", ["w" + f, "ws" + f, "wz" + f, "wb" + f], ["wq" + f], name="wquant" + f, domain=Q,
                   signed=1, narrow=1),
                mk("Conv", ["xq" + f, "wq" + f, "cb" + f], ["c" + f], name="conv" + f, pads=[pads] * 4,
                   kernel_shape=[spec["k"]] * 2),
            ]  # fmt: skip
            h, w = (in_shape[2] + 2 * pads - spec["k"] + 1), (in_shape[3] + 2 * pads - spec["k"] + 1)
            out_shape = [in_shape[0], spec["m"], h, w]
        else:
            flat = spec.get("flatten")
            k = int(np.prod(in_shape[1:])) if flat else in_shape[-1]
            p = _dense(i + 3, k, spec["n"], spec)
            if "same_act_as" in spec:
                j = spec["same_act_as"]
                p.update({key: params[j][key] for key in ("as", "az", "ab")})
            x_in = src
            if flat == "before":
                nodes.append(mk("Flatten", [x_in], ["fl" + f], name="flatten" + f))
                x_in = "fl" + f
            if spec.get("bipolar"):
                nodes.append(mk("BipolarQuant", [x_in, "as" + f], ["xq" + f], name="aquant" + f, domain=Q))
            else:
                nodes.append(mk("Quant", [x_in, "as" + f, "az" + f, "ab" + f], ["xq" + f], name="aquant" + f,
                                domain=Q, signed=int(spec.get("signed", False)),
                                narrow=int(spec.get("narrow", False))))  # fmt: skip
            x_in = "xq" + f
            if flat == "after":
                nodes.append(mk("Flatten", [x_in], ["fl" + f], name="flatten" + f))
                x_in = "fl" + f
            if spec.get("binary"):
                nodes.append(mk("BipolarQuant", ["w" + f, "ws" + f], ["wq" + f], name="wquant" + f, domain=Q))
                for key in ("wz", "wb"):
                    del p[key]
            else:
                nodes.append(mk("Quant", ["w" + f, "ws" + f, "wz" + f, "wb" + f], ["wq" + f], name="wquant" + f,
                                domain=Q, signed=1, narrow=1))  # fmt: skip
            if spec["op"] == "matmul":
                nodes.append(mk("MatMul", [x_in, "wq" + f], ["c" + f], name="fc" + f))
            else:
                nodes.append(mk("Gemm", [x_in, "wq" + f, "cb" + f], ["c" + f], name="fc" + f,
                                transB=int(spec["op"] == "gemm")))  # fmt: skip
            out_shape = [in_shape[0], spec["n"]] if flat else [*in_shape[:-1], spec["n"]]
        inits += [_init(key + f, v) for key, v in p.items()]
        out = "c" + f
        if spec.get("relu", True):
            nodes.append(mk("Relu", [out], ["r" + f], name="relu" + f))
            out = "r" + f
        params.append(p)
        outs.append(out)
        shapes.append(out_shape)
    read = {layer.get("reads", i - 1) for i, layer in enumerate(layers)}
    finals = [o for i, o in enumerate(outs) if i not in read]
    if side is not None:
        nodes.append(mk("Neg", [outs[side]], ["side"], name="side"))
        finals.append("side")
    if also_output is not None:
        finals.append(outs[also_output])
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in finals],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m, params


def _net_expected(layers: list[dict], params: list[dict], x: np.ndarray) -> list[np.ndarray]:
    """Every layer's float32 output by the numpy references, in order."""
    ys: list[np.ndarray] = []
    for i, (spec, p) in enumerate(zip(layers, params, strict=True)):
        src_i = spec.get("reads", i - 1)
        src = x if src_i < 0 else ys[src_i]
        if spec["op"] == "conv":
            ys.append(_reference(src, p, spec.get("signed", False), spec.get("pads", 1), 1, 1, spec.get("relu", True)))
            continue
        if spec.get("flatten"):
            src = src.reshape(src.shape[0], -1)
        if "same_act_as" in spec:
            spec = {**spec, **{k: layers[spec["same_act_as"]].get(k) for k in ("signed", "narrow") if k in
                               layers[spec["same_act_as"]]}}  # fmt: skip
        ys.append(_dense_reference(src, p, spec))
    return ys


def _run_net(layers: list[dict], shape: list, batches: tuple[int, ...], **kw) -> onnx.ModelProto:
    """Build the net, run it through an integer session at each batch size and compare every graph output with the
    references bit for bit; returns the prepared model (for its structure)."""
    m, params = _net(layers, shape, **kw)
    session = ortquant.InferenceSession(m, integer=True)
    read = {layer.get("reads", i - 1) for i, layer in enumerate(layers)}
    for nb in batches:
        x = (np.random.default_rng(11 + nb).standard_normal([nb, *shape[1:]]) * 0.6).astype(np.float32)
        ys = _net_expected(layers, params, x)
        want = [y for i, y in enumerate(ys) if i not in read]
        if kw.get("side") is not None:
            want.append(-ys[kw["side"]])
        if kw.get("also_output") is not None:
            want.append(ys[kw["also_output"]])
        got = session.run(None, {"x": x})
        assert len(got) == len(want)
        for g, e in zip(got, want, strict=True):
            assert g.shape == e.shape, (g.shape, e.shape)
            np.testing.assert_array_equal(g, e)
    return ortquant.prepare_model(m, integer=True)


def _count(prepared: onnx.ModelProto) -> dict[str, int]:
    ops: dict[str, int] = {}
    for n in unchain(prepared):
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    return ops


DENSE_CASES = {
    # two MatMul layers, unsigned 4-bit codes between them
    "mlp2": ([{"op": "matmul", "n": 12}, {"op": "matmul", "n": 10, "relu": False}], ["n", 16], 1, 0),
    # three Gemm layers (transB, bias): two producers
    "mlp3_gemm": ([{"op": "gemm", "n": 24}, {"op": "gemm", "n": 16}, {"op": "gemm", "n": 8, "relu": False}],
                  ["n", 20], 2, 0),
    # four layers of every kind: signed codes after a layer without Relu, an unsigned 8-bit quantizer (codes stored
    # as a - 128), a signed narrow 3-bit one, a Gemm without transB
    "mlp4_mixed": ([{"op": "matmul", "n": 32, "relu": False}, {"op": "gemm", "n": 24, "signed": True},
                    {"op": "gemm_t0", "n": 16, "bits": 8, "scale": 0.004},
                    {"op": "matmul", "n": 10, "bits": 3, "signed": True, "narrow": True, "relu": False}],
                   ["n", 24], 3, 0),
    # an unsigned quantizer with a zero point (codes a = q - z below 0)
    "zeropt": ([{"op": "matmul", "n": 16}, {"op": "matmul", "n": 8, "zeropt": 3, "relu": False}], ["n", 12], 1, 0),
    # a 3-D input [b, t, K]: QGemm and QGemmCodes over the last axis
    "tokens": ([{"op": "matmul", "n": 12, "relu": False}, {"op": "matmul", "n": 8, "signed": True}], ["n", 5, 16],
               1, 0),
    # larger layers (several row and column blocks of the engine)
    "large": ([{"op": "matmul", "n": 200}, {"op": "gemm", "n": 130, "scale": 0.1},
               {"op": "matmul", "n": 70, "scale": 0.15, "relu": False}], ["n", 300], 2, 0),
    # one producer, two readers with the same quantizer
    "two_readers": ([{"op": "gemm", "n": 16}, {"op": "gemm", "n": 8}, {"op": "matmul", "n": 6, "reads": 0,
                                                                        "same_act_as": 1}], ["n", 12], 1, 0),
    # a binary-weight producer on the bit kernels (bit-serial: a 2-bit activation; XNOR-popcount: bipolar)
    "bitserial_producer": ([{"op": "gemm", "n": 20, "binary": True, "bits": 2, "scale": 0.3},
                            {"op": "gemm", "n": 8, "relu": False}], ["n", 70], 1, 0),
    "xnor_producer": ([{"op": "gemm", "n": 20, "binary": True, "bipolar": True, "scale": 0.5},
                       {"op": "matmul", "n": 8, "relu": False}], ["n", 70], 1, 0),
    # a CNN's head: conv -> Relu -> Quant -> Flatten -> Gemm (Brevitas' order)
    "conv_flatten_gemm": ([{"op": "conv", "m": 4, "k": 3}, {"op": "gemm", "n": 10, "flatten": "after",
                                                            "relu": False}], ["n", 3, 6, 6], 0, 1),
    # conv -> conv -> Flatten -> Quant -> Gemm -> Gemm: codes from every layer but the last
    "conv_flatten_mlp": ([{"op": "conv", "m": 4, "k": 3}, {"op": "conv", "m": 6, "k": 3},
                          {"op": "gemm", "n": 16, "flatten": "before"}, {"op": "gemm", "n": 10, "relu": False}],
                         ["n", 3, 5, 5], 1, 2),
    # a convolution read by a convolution and, through Flatten, by a Gemm with the same quantizer
    "conv_mixed_readers": ([{"op": "conv", "m": 4, "k": 3}, {"op": "conv", "m": 4, "k": 3},
                            {"op": "gemm", "n": 10, "flatten": "after", "reads": 0, "same_act_as": 1,
                             "relu": False}], ["n", 3, 6, 6], 0, 1),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DENSE_CASES))
def test_dense_codes_between_layers_match_the_reference(case):
    layers, shape, n_gemm_codes, n_conv_codes = DENSE_CASES[case]
    m, _ = _net(layers, shape)
    ops = _count(ortquant.prepare_model(m, integer=True))
    assert ops.get("QGemmCodes", 0) == n_gemm_codes and ops.get("QConvCodes", 0) == n_conv_codes, ops
    _run_net(layers, shape, (1, 7))


def test_qgemm_codes_write_the_readers_quantizer_and_the_readers_take_int8():
    layers = [{"op": "gemm", "n": 16}, {"op": "matmul", "n": 8, "bits": 5, "signed": True, "relu": False}]
    m, params = _net(layers, ["n", 12])
    prepared = ortquant.prepare_model(m, integer=True)
    ops = [n.op_type for n in unchain(prepared)]
    assert ops == ["QGemmCodes", "QGemm"], ops
    producer, reader = unchain(prepared)
    assert reader.input[0] == producer.output[0] and producer.output[0].endswith("__codes")
    out_act = {a.name[4:]: helper.get_attribute_value(a) for a in producer.attribute if a.name.startswith("out_act_")}
    act = {a.name: helper.get_attribute_value(a) for a in reader.attribute if a.name.startswith("act_")}
    assert out_act["act_scale"] == pytest.approx(float(params[1]["as"])) and out_act["act_bits"] == 5
    assert out_act["act_signed"] == 1 and out_act == {**out_act, **act}


def test_a_dense_value_also_read_as_float_stays_float():
    layers = [{"op": "matmul", "n": 12}, {"op": "matmul", "n": 8}]
    m, _ = _net(layers, ["n", 16], also_output=0)
    assert "QGemmCodes" not in _count(ortquant.prepare_model(m, integer=True))
    _run_net(layers, ["n", 16], (1, 3), also_output=0)


def test_a_dense_value_read_by_another_node_stays_float():
    layers = [{"op": "gemm", "n": 12}, {"op": "gemm", "n": 8}]
    m, _ = _net(layers, ["n", 16], side=0)
    assert "QGemmCodes" not in _count(ortquant.prepare_model(m, integer=True))
    _run_net(layers, ["n", 16], (1, 3), side=0)


def test_dense_readers_with_different_quantizers_stay_float():
    layers = [{"op": "gemm", "n": 16}, {"op": "gemm", "n": 8}, {"op": "gemm", "n": 8, "reads": 0, "scale": 0.021}]
    m, _ = _net(layers, ["n", 12])
    prepared = ortquant.prepare_model(m, integer=True)
    assert _count(prepared).get("QGemm") == 3, _count(prepared)
    assert fuse_integer_codes(prepared) is prepared


@pytest.mark.parametrize("reader", [{"bits": 4}, {"bits": 2, "scale": 0.3}, {"bipolar": True, "scale": 0.5}])
def test_binary_weight_dense_readers_stay_float(reader):
    """A reader with +-1 weights may take the bit kernels (which read float32 values): not fused, whatever its
    activation (the int8 engine, bit-serial, XNOR-popcount)."""
    layers = [{"op": "gemm", "n": 16, "relu": False}, {"op": "gemm", "n": 8, "binary": True, **reader}]
    m, _ = _net(layers, ["n", 12])
    prepared = ortquant.prepare_model(m, integer=True)
    assert [n.op_type for n in unchain(prepared)] == ["QGemm", "QGemm"]
    assert fuse_integer_codes(prepared) is prepared


def test_wide_dense_readers_stay_float():
    layers = [{"op": "gemm", "n": 16}, {"op": "gemm", "n": 8, "bits": 12, "scale": 0.001}]
    m, _ = _net(layers, ["n", 12])
    prepared = ortquant.prepare_model(m, integer=True)
    assert [n.op_type for n in unchain(prepared)] == ["QGemm", "QGemm"]


def test_qgemm_codes_without_its_output_quantizer_is_a_clear_error():
    m, _ = _net([{"op": "gemm", "n": 16}, {"op": "gemm", "n": 8}], ["n", 12])
    prepared = ortquant.prepare_model(m, integer=True)
    (node,) = prepared.graph.node  # the two layers as one QChain: step 0's attributes are __0_*
    assert next(n.op_type for n in unchain(prepared)) == "QGemmCodes"
    kept = [a for a in node.attribute if not a.name.startswith("__0_out_act_")]
    del node.attribute[:]
    node.attribute.extend(kept)
    with pytest.raises(Exception, match=r"QGemmCodes.*'out_act_"):
        ortquant.InferenceSession(prepared)
