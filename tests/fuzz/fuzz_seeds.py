"""Valid seed models of every op family for the fuzzer: (name, ModelProto, feeds).

Sources: the linger 1.1.1 conformance exports in tests/data/linger (conv, depthwise, conv1d, transposed conv, linear,
bmm, LSTM/GRU with and without lengths, pools, softmax, elementwise), the QONNX demo models in models/ (Quant,
Trunc, BipolarQuant, FloatQuant in real graphs), and one-node models built here for the ops those do not cover
(QONNX structural ops, nGraph Quantize/Dequantize, linger BatchNorm, Requant, LayerNormInt, GenericPartition).
Every seed runs cleanly (tests/fuzz/test_fuzz.py::test_seeds_run checks it), so what a mutation breaks is the
mutation's doing.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
IR_VERSION = 10

Seed = tuple[str, onnx.ModelProto, dict[str, np.ndarray]]

_NP = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
}


def one_node(
    op: str,
    domain: str,
    inputs: list[np.ndarray | None],
    const: list[bool],
    attrs: dict,
    out_types: list[int],
    opsets: dict[str, int] | None = None,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model with one node named '<op>_fz'; const[i] makes input i an initializer."""
    names, gin, inits, feeds = [], [], [], {}
    for i, (a, c) in enumerate(zip(inputs, const, strict=True)):
        if a is None:
            names.append("")
            continue
        n = f"in{i}"
        names.append(n)
        if c:
            inits.append(numpy_helper.from_array(a, n))
        else:
            gin.append(helper.make_tensor_value_info(n, _NP[a.dtype], list(a.shape)))
            feeds[n] = a
    outs = [f"out{i}" for i in range(len(out_types))]
    node = helper.make_node(op, names, outs, domain=domain, name=f"{op}_fz", **attrs)
    graph = helper.make_graph(
        [node],
        "fz",
        gin,
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types, strict=True)],
        initializer=inits,
    )
    ops = [helper.make_opsetid("", 13), helper.make_opsetid(domain, 1)]
    for d, v in (opsets or {}).items():
        ops = [o for o in ops if o.domain != d] + [helper.make_opsetid(d, v)]
    m = helper.make_model(graph, opset_imports=ops)
    m.ir_version = IR_VERSION
    return m, feeds


Q, L, N = "qonnx.custom_op.general", "thinker", "ngraph"
F, I8, I16, I32 = TensorProto.FLOAT, TensorProto.INT8, TensorProto.INT16, TensorProto.INT32


def _handwritten() -> list[Seed]:
    rng = np.random.default_rng(0)
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    i8 = lambda *s: rng.integers(-128, 128, s).astype(np.int8)  # noqa: E731
    s = lambda v, t=np.float32: np.array(v, t)  # noqa: E731
    out: list[Seed] = []

    def add(name, *a, **k):
        m, feeds = one_node(*a, **k)
        out.append((name, m, feeds))

    x = f32(2, 3, 4)
    add(
        "q_quant",
        "Quant",
        Q,
        [x, s(0.1), s(0.0), s(4.0)],
        [False, True, True, True],
        {"signed": 1, "narrow": 0, "rounding_mode": "ROUND"},
        [F],
    )
    add("q_quant_rt", "Quant", Q, [x, s(0.1), s(0.0), s(8.0)], [False, False, False, False], {"signed": 1}, [F])
    add("q_bipolar", "BipolarQuant", Q, [x, s(0.5)], [False, True], {}, [F])
    add(
        "q_trunc_v1",
        "Trunc",
        Q,
        [x, s(0.25), s(0.0), s(8.0), s(4.0)],
        [False, True, True, True, True],
        {"rounding_mode": "FLOOR"},
        [F],
    )
    add(
        "q_trunc_v2",
        "Trunc",
        Q,
        [x, s(0.25), s(0.0), s(8.0), s(0.5), s(4.0)],
        [False] + [True] * 5,
        {"rounding_mode": "ROUND", "signed": 1, "narrow": 0},
        [F],
        opsets={Q: 2},
    )
    add(
        "q_floatquant",
        "FloatQuant",
        Q,
        [x, s(1.0), s(4.0), s(3.0), s(7.0), s(448.0)],
        [False] + [True] * 5,
        {"rounding_mode": "ROUND", "has_inf": 0, "has_nan": 1, "has_subnormal": 1, "saturation": 1},
        [F],
    )
    add(  # the float64 path (QKeras/hls4ml-style float64 and int64 parameters), some of them runtime inputs
        "q_floatquant_wide",
        "FloatQuant",
        Q,
        [x, s(0.37, np.float64), s(4, np.int64), s(3.0, np.float64), s(7.0, np.float64), s(448.0, np.float64)],
        [False, True, False, True, True, False],
        {"rounding_mode": "FLOOR", "has_inf": 1, "has_nan": 0, "has_subnormal": 0, "saturation": 0},
        [F],
    )
    add(
        "q_multithreshold",
        "MultiThreshold",
        Q,
        [f32(2, 3, 4, 4), np.sort(f32(3, 5), axis=1)],
        [False, True],
        {"out_dtype": "UINT4", "out_scale": 0.5, "out_bias": -1.0, "data_layout": "NCHW"},
        [F],
    )
    add(
        "q_xnor",
        "XnorPopcountMatMul",
        Q,
        [(f32(3, 8) > 0).astype(np.float32), (f32(8, 5) > 0).astype(np.float32)],
        [False, True],
        {},
        [F],
    )
    add(
        "q_im2col",
        "Im2Col",
        Q,
        [f32(1, 6, 6, 2)],
        [False],
        {"kernel_size": [3, 3], "stride": [2, 1], "pad_amount": [1, 1, 1, 1], "dilations": [1, 1], "pad_value": 0},
        [F],
    )
    add(
        "q_maxpoolnhwc",
        "MaxPoolNHWC",
        Q,
        [f32(1, 7, 7, 3)],
        [False],
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [2, 2], "ceil_mode": 0},
        [F],
    )
    add(
        "q_quantavgpool",
        "QuantAvgPool2d",
        Q,
        [np.round(f32(1, 3, 6, 6) * 10).astype(np.float32)],
        [False],
        {"kernel": 2, "stride": 2, "ibits": 8, "obits": 8, "signed": 1, "data_layout": "NCHW"},
        [F],
    )
    add("q_debugmarker", "DebugMarker", Q, [x], [False], {"export_debug_name": "dbg"}, [F])
    add("q_genericpartition", "GenericPartition", Q, [x], [False], {"model": "partition_0.onnx"}, [F])
    # nGraph
    add(
        "ng_quantize",
        "Quantize",
        N,
        [f32(2, 3), s(0.1), s(0, np.int8)],
        [False, True, True],
        {"round_mode": "ROUND_NEAREST_TOWARD_EVEN"},
        [I8],
    )
    add(
        "ng_quantize_axes",
        "Quantize",
        N,
        [f32(2, 3), s([0.1, 0.2, 0.3]), s([0, 1, 255], np.uint8)],
        [False, True, True],
        {"round_mode": "ROUND_NEAREST_UPWARD", "axes": [1]},
        [TensorProto.UINT8],
    )
    add("ng_dequantize", "Dequantize", N, [i8(2, 3), s(0.1), s(0, np.int8)], [False, True, True], {}, [F])
    add(
        "ng_dequantize_axes",
        "Dequantize",
        N,
        [i8(2, 3), s([0.1, 0.2]), s([1, -1], np.int8)],
        [False, True, True],
        {"axes": [0]},
        [F],
    )
    # linger ops the conformance exports do not hold
    add(
        "l_bn2d",
        "BatchNorm2dInt",
        L,
        [i8(2, 3, 4, 4), i8(3), rng.integers(-100, 100, 3).astype(np.int32), f32(3), np.abs(f32(3))],
        [False, True, True, True, True],
        {"scale_x": 32.0, "scale_w": 64.0, "scale_o": 64.0, "o_bits": 8, "data_bits": 8},
        [I8],
    )
    add(
        "l_bn1d",
        "BatchNorm1dInt",
        L,
        [i8(2, 3, 5), i8(3), rng.integers(-100, 100, 3).astype(np.int32), f32(3), np.abs(f32(3))],
        [False, True, True, True, True],
        {"scale_x": 32.0, "scale_w": 64.0, "scale_o": 16.0, "o_bits": 16, "data_bits": 8},
        [I16],
    )
    add(
        "l_requant",
        "Requant",
        L,
        [i8(2, 5)],
        [False],
        {"data_bits": 8, "o_bits": 8, "scale_x": 64.0, "scale_o": 16.0},
        [I8],
    )
    add(
        "l_requant32",
        "Requant",
        L,
        [i8(2, 5)],
        [False],
        {"data_bits": 8, "o_bits": 32, "scale_x": 4.0, "scale_o": 64.0},
        [I32],
    )
    add(
        "l_avgpool",
        "AvgPool2dInt",
        L,
        [i8(1, 2, 5, 5)],
        [False],
        {
            "kernel_shape": [3, 3],
            "strides": [2, 2],
            "pads": [1, 1, 1, 1],
            "data_bits": 8,
            "scale_x": 16.0,
            "platform_quant": "luna_quant",
        },
        [I8],
    )
    add(
        "l_iqpad",
        "iqPad",
        L,
        [i8(1, 2, 3, 3), np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64)],
        [False, False],
        {"mode": "constant"},
        [I8],
    )
    add(
        "l_layernorm",
        "LayerNormInt",
        L,
        [i8(2, 3), np.ones(3, np.int8), np.ones(3, np.int32)],
        [False, True, True],
        {"scale_x": 1.0},
        [I8],
    )
    w = i8(4, 3, 3, 3)
    add(
        "l_conv_narrow",
        "Conv2dInt",
        L,
        [i8(1, 3, 5, 6), w, rng.integers(-50, 50, 4).astype(np.int32)],
        [False, True, True],
        {
            "strides": [2, 3],
            "pads": [1, 1, 1, 1],
            "scale_x": 16.0,
            "scale_w": 64.0,
            "scale_o": 8.0,
            "o_bits": 8,
            "platform_quant": "luna_quant",
        },
        [I8],
    )
    add(
        "l_conv_dw",
        "Conv2dInt",
        L,
        [i8(1, 4, 5, 5), i8(4, 1, 3, 3)],
        [False, True],
        {
            "strides": [1, 2],
            "pads": [1, 1, 1, 1],
            "group": 4,
            "scale_x": 16.0,
            "scale_w": 64.0,
            "scale_o": 8.0,
            "o_bits": 8,
            "platform_quant": "luna_quant",
        },
        [I8],
    )
    add(
        "l_conv1d_rt",
        "Conv1dInt",
        L,
        [i8(1, 3, 7), i8(2, 3, 3)],
        [False, False],
        {"strides": [2], "pads": [1, 1], "scale_x": 16.0, "scale_w": 64.0, "platform_quant": "luna_quant"},
        [F],
    )
    add(
        "l_lstm_len",
        "LSTMInt_Is8_Is64",
        L,
        [
            i8(4, 2, 3),
            np.array([4, 2], np.int64),
            i8(8, 3),
            i8(8, 2),
            rng.integers(-9, 9, 8).astype(np.int32),
            rng.integers(-9, 9, 8).astype(np.int32),
        ],
        [False, False, True, True, True, True],
        {
            "hidden_size": 2,
            "input_size": 3,
            "scale_i": 16.0,
            "scale_h": 32.0,
            "scale_iw": 64.0,
            "scale_hw": 64.0,
            "scale_o": 32.0,
            "o_bits": 8,
            "data_bits": 8,
            "platform_quant": "luna_quant",
        },
        [I8, F, F],
    )
    return out


def _npz_inputs(m: onnx.ModelProto, d: np.lib.npyio.NpzFile, keys: list[str]) -> dict[str, np.ndarray]:
    inits = {i.name for i in m.graph.initializer}
    names = [i.name for i in m.graph.input if i.name not in inits]
    return {n: np.asarray(d[k]) for n, k in zip(names, keys, strict=False)}


def _name_nodes(m: onnx.ModelProto) -> None:
    for i, n in enumerate(m.graph.node):
        if not n.name:
            n.name = f"{n.op_type}_{i}"


@functools.cache
def load_seeds(integer: bool = True) -> tuple[Seed, ...]:
    """All seeds, in a fixed order (the corpus of a given random seed is reproducible), with the models/ networks
    in integer mode too (QConv / QGemm / QuantCodes / Rescale, the XNOR-popcount path) unless ``integer`` is
    false.

    The seeds are built and prepared in a spawned interpreter: ``prepare_model`` runs onnxruntime sessions (weight
    quantizer folding, integer lowering), and the harness forks one child per case from this process, which must
    never have run one. A child forked from a process whose onnxruntime threads held a lock at the fork can hang
    on it: it happened once under ASan, while the seeds were prepared here (tests/fuzz/README.md)."""
    import multiprocessing

    with multiprocessing.get_context("spawn").Pool(1) as pool:
        raw = pool.apply(_prepared_seeds, (integer,))
    return tuple((name, onnx.load_from_string(blob), feeds) for name, blob, feeds in raw)


def _prepared_seeds(integer: bool) -> list[tuple[str, bytes, dict[str, np.ndarray]]]:
    """load_seeds' work, run in the spawned interpreter; models as serialized bytes."""
    import ortquant

    seeds: list[Seed] = list(_handwritten())
    for f in sorted((REPO / "tests" / "data" / "linger").glob("*.onnx")):
        m = onnx.load(str(f))
        d = np.load(f.with_suffix(".npz"))
        keys = sorted((k for k in d.files if k.startswith("x") and k[1:].isdigit()), key=lambda k: int(k[1:]))
        feeds = _npz_inputs(m, d, keys)
        m = ortquant.prepare_model(m)
        _name_nodes(m)
        seeds.append((f"linger_{f.stem}", m, feeds))

    def qonnx_seeds(name: str, m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
        """The model prepared in the default mode (``qonnx_<name>``) and in integer mode (``integer_<name>``)."""
        m_int = ortquant.prepare_model(m, integer=True) if integer else None
        m = ortquant.prepare_model(m)
        _name_nodes(m)
        seeds.append((f"qonnx_{name}", m, feeds))
        if m_int is not None:
            _name_nodes(m_int)
            seeds.append((f"integer_{name}", m_int, feeds))

    for f in sorted((REPO / "models").glob("*.onnx")):
        m = onnx.load(str(f))
        qonnx_seeds(f.stem, m, {m.graph.input[0].name: np.asarray(np.load(f.with_suffix(".npz"))["input_b1"])})
    for f in sorted((REPO / "models" / "as_exported").glob("*.onnx")):  # Brevitas' files as exported
        d = np.load(f.with_suffix(".npz"))
        feeds = {k[3:]: np.asarray(d[k]) for k in d.files if k.startswith("in:")}
        qonnx_seeds(f"exported_{f.stem}", onnx.load(str(f)), feeds)
    if integer:
        m, feeds = _xnor_conv()
        seeds.append(("integer_xnor_conv", ortquant.prepare_model(m, integer=True), feeds))
        m, feeds = _declared_input_conv()
        seeds.append(("integer_declared_input", ortquant.prepare_model(m, integer=True), feeds))
        m, feeds = _layer_sum_chain()
        seeds.append(("integer_layer_sums", ortquant.prepare_model(m, integer=True), feeds))
    return [(name, m.SerializeToString(), feeds) for name, m, feeds in seeds]


def _x_to_y(
    nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], name: str, x_shape: list[int]
) -> onnx.ModelProto:
    """A hand-written seed's model: float input x of ``x_shape``, output y, the standard and QONNX opsets."""
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
    )  # fmt: skip
    qonnx = "qonnx.custom_op.general"
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(qonnx, 1)])
    m.ir_version = IR_VERSION
    return m


def _xnor_conv() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A 1-bit convolution (BipolarQuant activation and weights, padded, grouped): integer mode runs it on the
    XNOR-popcount path, which no models/ network has for a convolution."""
    rng = np.random.default_rng(3)
    q = "qonnx.custom_op.general"
    inits = [
        numpy_helper.from_array(rng.standard_normal((6, 4, 3, 3)).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(0.5, np.float32), "sw"),
        numpy_helper.from_array(np.array(1.0, np.float32), "sx"),
    ]
    nodes = [
        helper.make_node("BipolarQuant", ["x", "sx"], ["xq"], name="bq_x", domain=q),
        helper.make_node("BipolarQuant", ["w", "sw"], ["wq"], name="bq_w", domain=q),
        helper.make_node("Conv", ["xq", "wq"], ["y"], name="conv", pads=[1, 0, 1, 2], group=2, strides=[1, 2]),
    ]
    m = _x_to_y(nodes, inits, "xnor_conv", [1, 8, 7, 9])
    return m, {"x": rng.standard_normal((1, 8, 7, 9)).astype(np.float32)}


def _declared_input_conv() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A convolution reading a graph input that declares finn_datatype UINT8: integer mode lowers it with
    ``act_check`` (its input checked against the grid at run time), which no models/ network has."""
    rng = np.random.default_rng(4)
    q = "qonnx.custom_op.general"
    inits = [
        numpy_helper.from_array((rng.standard_normal((4, 3, 3, 3)) * 0.2).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(0.05, np.float32), "ws"),
        numpy_helper.from_array(np.array(0.0, np.float32), "wz"),
        numpy_helper.from_array(np.array(4.0, np.float32), "wb"),
    ]
    nodes = [
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="quant_w", domain=q, signed=1, narrow=1),
        helper.make_node("Conv", ["x", "wq"], ["y"], name="conv", pads=[1, 1, 1, 1]),
    ]
    m = _x_to_y(nodes, inits, "declared_input_conv", [1, 3, 6, 7])
    a = m.graph.quantization_annotation.add()
    a.tensor_name = "x"
    kv = a.quant_parameter_tensor_names.add()
    kv.key, kv.value = "finn_datatype", "UINT8"
    return m, {"x": rng.integers(0, 256, (1, 3, 6, 7)).astype(np.float32)}


def _layer_sum_chain() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Conv -> Conv with no quantizer between, on power-of-two scales (QKeras-style): integer mode lowers the second
    layer on the grid of the first one's sum (read per tensor from per-channel weight scales, 19 bits: three byte
    planes), which no models/ network has."""
    rng = np.random.default_rng(5)
    q = "qonnx.custom_op.general"

    def c(name: str, v: object) -> onnx.TensorProto:
        return numpy_helper.from_array(np.asarray(v, np.float32), name)

    inits = [
        c("as", 0.125), c("z", 0.0), c("b4", 4.0), c("ws1", 2.0 ** rng.integers(-4, -1, (4, 1, 1, 1))), c("ws2", 0.5),
        c("w1", rng.uniform(-1, 1, (4, 64, 3, 3))), c("w2", rng.uniform(-4, 4, (3, 4, 3, 3))),
    ]  # fmt: skip
    nodes = [
        helper.make_node("Quant", ["x", "as", "z", "b4"], ["xq"], name="quant_x", domain=q, signed=0),
        helper.make_node("Quant", ["w1", "ws1", "z", "b4"], ["w1q"], name="quant_w1", domain=q, signed=1, narrow=1),
        helper.make_node("Quant", ["w2", "ws2", "z", "b4"], ["w2q"], name="quant_w2", domain=q, signed=1, narrow=1),
        helper.make_node("Conv", ["xq", "w1q"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["c1", "w2q"], ["y"], name="conv2", pads=[0, 1, 0, 1]),
    ]
    m = _x_to_y(nodes, inits, "layer_sums", [1, 64, 5, 6])
    return m, {"x": rng.uniform(-0.2, 2.2, (1, 64, 5, 6)).astype(np.float32)}
