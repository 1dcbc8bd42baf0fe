"""ONNX schemas of the integer-mode ops (``ortquant.integer``: QConv, QGemm), written by integer mode's graph
transform (``transforms/lower_integer.py``); docs/ops.md "Integer mode" has the formulas."""

from __future__ import annotations

import dataclasses

import onnx
from onnx import TensorProto

from ortquant.schemas._builder import (
    Attr,
    AttrType,
    Op,
    Optional,
    Param,
    Variadic,
    attr,
    input_shape,
    register_ops,
    set_output,
)
from ortquant.schemas.linger_matrix import _ints, _spatial

DOMAINS = ("ortquant.integer",)

_ACT = [
    Attr("act_scale", AttrType.FLOAT, required=True, doc="per-tensor scale of the activation quantizer (> 0)"),
    Attr("act_zeropt", AttrType.FLOAT, 0.0, doc="zero point (an integer value)"),
    Attr("act_bits", AttrType.INT, 8, doc="bit width 1..24 (9..16: two byte planes on the int8 engine, 17..24: three)"),
    Attr("act_signed", AttrType.INT, 1),
    Attr("act_narrow", AttrType.INT, 0),
    Attr("act_rounding_mode", AttrType.STRING, "ROUND", doc="a QONNX rounding mode name"),
    Attr("act_bipolar", AttrType.INT, 0, doc="1: BipolarQuant (x / s >= 0 ? 1 : -1)"),
    Attr("relu", AttrType.INT, 0, doc="1: a Relu on the output, fused (y < 0 ? 0 : y)"),
]
# QConv / QGemm only (not QuantCodes).
_XNOR = Attr("xnor", AttrType.INT, 1, doc="1: a binary-weight layer (weight codes +-1, bipolar or 1- to 2-bit "
             "activation) runs on the bit kernels; 0: on the int8 engine (same bits; for benchmarks)")  # fmt: skip
# QConv / QGemm (and their Codes forms).
_W_SHIFT = Attr("w_shift", AttrType.INTS, doc="absent: none; else one integer per output channel: the layer's weight "
                "codes are W[j] + w_shift[j] (codes wider than int8 whose channels each span at most 256 values, "
                "e.g. uint8 weights with a zero point per channel; at most 8-bit activations, never the bit "
                "kernels)")  # fmt: skip
_CHECK = Attr("act_check", AttrType.STRING, doc="absent: none; else the graph input and declared type (finn_datatype) "
              "that put X on the quantizer's grid: X's values are checked to lie within 0.01 of a step of that grid, "
              "an error naming it otherwise (transforms/integer_grid_activation.py)")  # fmt: skip
# QConv / QConvCodes only.
_CHANNEL_SCALES = Attr(
    "act_channel_scales",
    AttrType.FLOATS,
    doc="absent: none; else one scale per input channel (> 0): a depthwise layer (group = the input channels, one "
    "each) whose activation quantizer is per channel; X's channel c is quantized with act_* and the scale "
    "act_channel_scales[c] (act_scale is then unused), at most 8 bits, not bipolar (transforms/lower_integer.py)",
)
_CONV = [
    Attr("kernel_shape", AttrType.INTS),
    Attr("strides", AttrType.INTS),
    Attr("pads", AttrType.INTS),
    Attr("dilations", AttrType.INTS),
    Attr("group", AttrType.INT, 1),
]

# QConvCodes / QGemmCodes only: the quantizer of their int8 output codes (the act_* of the layers that read them).
_OUT_ACT = [
    Attr("out_act_scale", AttrType.FLOAT, required=True, doc="the output quantizer's scale (> 0)"),
    Attr("out_act_zeropt", AttrType.FLOAT, 0.0),
    Attr("out_act_bits", AttrType.INT, 8, doc="1..8"),
    Attr("out_act_signed", AttrType.INT, 1),
    Attr("out_act_narrow", AttrType.INT, 0),
    Attr("out_act_rounding_mode", AttrType.STRING, "ROUND"),
    Attr("out_act_bipolar", AttrType.INT, 0),
]

_TABLE = Attr(
    "out_table",
    AttrType.INTS,
    doc="absent: none; else 256 int8 codes: each output code c is written as out_table[c + 128] (the quantizers and "
    "per-element ops between this layer and the codes' readers, folded; transforms/integer_code_flow.py)",
)

_CHANNELS_LAST = Attr("channels_last", AttrType.INT, 0, doc="1: the output is [N, OH, OW, M] (a following Transpose "
                      "[0, 2, 3, 1] fused; transforms/integer_channels_last.py); QConv without R, pool or "
                      "depth_to_space only")  # fmt: skip

_LEAKY = Attr(
    "leaky_relu_alpha",
    AttrType.FLOAT,
    doc="absent: none; else a LeakyRelu fused on the convolution's output, y >= 0 ? y : alpha * y, before pool, "
    "shuffle and R (transforms/integer_leaky_relu.py)",
)

# QConv / QConvCodes with R given as int8 codes: their quantizer (the act_* of the layers that read the same codes).
_RESIDUAL_ACT = [
    dataclasses.replace(a, name=a.name.replace("out_act_", "residual_act_"), required=False) for a in _OUT_ACT
]

_POOL = Attr("pool", AttrType.INTS, doc="[pH, pW]: a fused MaxPool of window and stride [pH, pW] (no pads, floor "
             "rounding) on the output (transforms/integer_maxpool.py); absent or [1, 1]: none")  # fmt: skip

_D2S = [
    Attr("depth_to_space", AttrType.INT, 1, doc="a fused DepthToSpace of this block size on the output "
         "(transforms/integer_depth_to_space.py); 1: none"),
    Attr("depth_to_space_mode", AttrType.STRING, "DCR", doc="its mode, DCR or CRD (as DepthToSpace's mode)"),
]  # fmt: skip


def _infer_conv(ctx: onnx.shape_inference.InferenceContext, elem: int = TensorProto.FLOAT) -> None:
    x, w = input_shape(ctx, 0), input_shape(ctx, 1)
    if x is None or len(x) != 4 or w is None or len(w) != 4:
        set_output(ctx, 0, elem, None)
        return
    s, d, p = _ints(ctx, "strides", 2, 1), _ints(ctx, "dilations", 2, 1), _ints(ctx, "pads", 4, 0)
    k = attr(ctx, "kernel_shape")
    k = list(k) if k is not None and len(k) == 2 else w[2:]
    spatial = _spatial(x, k, s, d, p, False, [0, 0])
    pool = attr(ctx, "pool")
    if pool is not None and len(pool) == 2:  # the fused max pool: window == strides, floor
        spatial = [v // q if v is not None and q >= 1 else None for v, q in zip(spatial, pool, strict=True)]
    channels = w[0]
    bs = attr(ctx, "depth_to_space")
    if bs is not None and bs > 1:  # the fused DepthToSpace
        channels = channels // (bs * bs) if channels is not None else None
        spatial = [v * bs if v is not None else None for v in spatial]
    if attr(ctx, "channels_last"):
        set_output(ctx, 0, elem, [x[0], *spatial, channels])
        return
    set_output(ctx, 0, elem, [x[0], channels, *spatial])


def _infer_conv_codes(ctx: onnx.shape_inference.InferenceContext) -> None:
    _infer_conv(ctx, TensorProto.INT8)


def _infer_maxpool_codes(ctx: onnx.shape_inference.InferenceContext) -> None:
    x, k = input_shape(ctx, 0), attr(ctx, "kernel_shape")
    if x is None or len(x) != 4 or k is None or len(k) != 2:
        set_output(ctx, 0, TensorProto.INT8, None)
        return
    spatial = [v // q if v is not None and q >= 1 else None for v, q in zip(x[2:], k, strict=True)]
    set_output(ctx, 0, TensorProto.INT8, [x[0], x[1], *spatial])


def _infer_avgpool_codes(ctx: onnx.shape_inference.InferenceContext) -> None:
    x, k = input_shape(ctx, 0), attr(ctx, "kernel_shape")
    st = attr(ctx, "strides") or [1, 1]
    if x is None or len(x) != 4:
        set_output(ctx, 0, TensorProto.FLOAT, None)
        return
    if attr(ctx, "global"):
        set_output(ctx, 0, TensorProto.FLOAT, [x[0], x[1], 1, 1])
        return
    if k is None or len(k) != 2 or len(st) != 2:
        set_output(ctx, 0, TensorProto.FLOAT, [x[0], x[1], None, None])
        return
    spatial = [(v - q) // t + 1 if v is not None and q >= 1 and t >= 1 and v >= q else None
               for v, q, t in zip(x[2:], k, st, strict=True)]  # fmt: skip
    set_output(ctx, 0, TensorProto.FLOAT, [x[0], x[1], *spatial])


def _infer_gemm(ctx: onnx.shape_inference.InferenceContext, elem: int = TensorProto.FLOAT) -> None:
    x, w = input_shape(ctx, 0), input_shape(ctx, 1)
    if x is None or not x:
        set_output(ctx, 0, elem, None)
        return
    n = w[0] if w is not None and len(w) == 2 else None
    axis = attr(ctx, "flatten")
    if axis is not None and axis >= 0:  # X read as Flatten(X, axis): [prod(dims before the axis), N]
        if axis > len(x):
            set_output(ctx, 0, elem, None)
            return
        outer: int | None = 1
        for d in x[:axis]:
            outer = outer * d if outer is not None and d is not None else None
        set_output(ctx, 0, elem, [x[0] if axis == 1 else outer, n])
        return
    set_output(ctx, 0, elem, [*x[:-1], n])


def _infer_gemm_codes(ctx: onnx.shape_inference.InferenceContext) -> None:
    _infer_gemm(ctx, TensorProto.INT8)


def _infer_same(ctx: onnx.shape_inference.InferenceContext) -> None:
    set_output(ctx, 0, TensorProto.FLOAT, input_shape(ctx, 0))


def _infer_chain(ctx: onnx.shape_inference.InferenceContext) -> None:
    """A QChain's output: each step's own schema inference in turn (the step's attributes are the __<k>_* ones)."""
    ops = str(attr(ctx, "steps", b"").decode()).split()
    counts = list(attr(ctx, "step_inputs", []))
    if not ops or len(counts) != len(ops):
        return
    t = ctx.get_input_type(0)
    at = 1
    for k, (op, count) in enumerate(zip(ops, counts, strict=True)):
        schema = onnx.defs.get_schema(op, 1, DOMAINS[0])
        node = onnx.helper.make_node(op, [f"x{i}" for i in range(1 + count)], ["y"], domain=DOMAINS[0])
        for name in schema.attributes:
            a = ctx.get_attribute(f"__{k}_{name}")
            if a is not None:
                b = onnx.AttributeProto()
                b.CopyFrom(a)
                b.name = name
                node.attribute.append(b)
        types = {"x0": t, **{f"x{i}": ctx.get_input_type(at + i - 1) for i in range(1, 1 + count)}}
        t = onnx.shape_inference.infer_node_outputs(schema, node, types).get("y")
        if t is None:
            return
        at += count
    ctx.set_output_type(0, t)


def ops() -> list[Op]:
    """The integer-mode op schemas."""
    ins = [
        Param("X", "tensor(float)", doc="float activation, quantized in the op by the act_* quantizer"),
        Param("W", "tensor(int8)", doc="weight codes (constant)"),
        Param("S", "tensor(double)", doc="per-output-channel scale (constant)"),
        Param("B", "tensor(double)", doc="per-output-channel bias (constant)"),
    ]
    out = [Param("Y", "tensor(float)")]
    conv_ins = [
        Param(
            "X",
            "T",
            doc="float32 activation, quantized in the op by the act_* quantizer; or int8: its codes, "
            "as a QConvCodes whose out_act_* equal this op's act_* writes them",
        ),
        *ins[1:],
        Param(
            "R",
            "TR",
            Optional,
            doc="a residual of Y's shape added to the output (transforms/integer_residual.py); int8: the codes of "
            "the residual_act_* quantizer (transforms/integer_codes.py)",
        ),
    ]
    conv_types = [
        ("T", ["tensor(float)", "tensor(int8)"], "values or codes"),
        ("TR", ["tensor(float)", "tensor(int8)"], "values or codes"),
    ]
    gemm_ins = [
        Param(
            "X",
            "T",
            doc="float32 activation [..., K], quantized in the op by the act_* quantizer; or int8: its codes, as a "
            "QConvCodes / QGemmCodes whose out_act_* equal this op's act_* writes them",
        ),
        *ins[1:],
    ]
    gemm_doc = (
        "Y[..., j] = float32(double(sum_k a(X)[..., k] * W[j, k]) * S[j] + B[j]), W [N, K]; with flatten = axis, X "
        "is read as Flatten(X, axis) (2-D) first."
    )
    flatten = Attr("flatten", AttrType.INT, doc="absent: X [..., K] as it is; else an axis: X is read as ONNX "
                   "Flatten(X, axis) would give it, [rows, K] (a Flatten or Reshape before the op, fused; "
                   "transforms/integer_flatten.py)")  # fmt: skip
    x_rank = Attr("x_rank", AttrType.INT, 0, doc="0: any; else X (as read: 2 with flatten) must have this rank or "
                  "the op refuses it (2 where integer mode folded a BatchNormalization, which normalizes axis 1, into "
                  "a MatMul whose activation rank it could not infer)")  # fmt: skip
    conv_doc = (
        "Y[n, j] = float32(double(conv2d(a(X), W)[n, j]) * S[j] + B[j]), NCHW, pads [t, l, b, r]; with "
        "pool = [pH, pW] then a max pool of that window and stride (no pads, floor), or with depth_to_space "
        "a DepthToSpace; with R then Y + R (float32), the relu after that addition."
    )
    return [
        Op("QConv", conv_doc, conv_ins, out,
           [*_ACT, _CHANNEL_SCALES, _CHECK, _XNOR, _W_SHIFT, *_CONV, _LEAKY, _POOL, *_D2S, *_RESIDUAL_ACT,
            _CHANNELS_LAST], conv_types,
           _infer_conv),
        Op("QConvCodes", conv_doc + " Output: the int8 codes of the out_act_* quantizer of that Y "
           "(transforms/integer_codes.py).", conv_ins, [Param("Y", "tensor(int8)")],
           [*_ACT, _CHANNEL_SCALES, _CHECK, *_OUT_ACT, _TABLE, _XNOR, _W_SHIFT, *_CONV, _LEAKY, _POOL, *_D2S,
            *_RESIDUAL_ACT],
           conv_types,
           _infer_conv_codes),
        Op("MaxPoolCodes", "Y = MaxPool(X) over int8 codes, window kernel_shape = strides, no pads, floor rounding "
           "(the max of codes is the code of the max: transforms/integer_code_flow.py).",
           [Param("X", "tensor(int8)")], [Param("Y", "tensor(int8)")],
           [Attr("kernel_shape", AttrType.INTS, required=True, doc="[pH, pW], also the strides")], (),
           _infer_maxpool_codes),
        Op("AvgPoolCodes", "Y = the mean over each window of the values int8 codes X stand for (c + offset) * "
           "act_scale, float32(double(window sum) * act_scale / window size): an AveragePool without pads (floor "
           "rounding) or, with global = 1, a GlobalAveragePool after the quantizer whose codes a QConvCodes writes "
           "(transforms/integer_avgpool_codes.py).",
           [Param("X", "tensor(int8)")], [Param("Y", "tensor(float)")],
           [*(a for a in _ACT if a.name != "relu"),
            Attr("kernel_shape", AttrType.INTS, doc="[kH, kW] (not with global)"),
            Attr("strides", AttrType.INTS, doc="[sH, sW], default [1, 1]"),
            Attr("global", AttrType.INT, 0, doc="1: the window is the whole plane (GlobalAveragePool)")], (),
           _infer_avgpool_codes),
        Op("QGemm", gemm_doc, gemm_ins, out, [*_ACT, _CHECK, _XNOR, _W_SHIFT, flatten, x_rank], conv_types[:1],
           _infer_gemm),
        Op("QGemmCodes", gemm_doc + " Output: the int8 codes of the out_act_* quantizer of that Y "
           "(transforms/integer_codes.py).", gemm_ins, [Param("Y", "tensor(int8)")],
           [*_ACT, _CHECK, *_OUT_ACT, _XNOR, _W_SHIFT, flatten, x_rank], conv_types[:1], _infer_gemm_codes),
        *(Op(name, "Integer-mode layers run one after the other in one node (transforms/integer_chain.py; "
             "onnxruntime's cost per node is as large as a small layer's): the steps' ops (QConv, QConvCodes, QGemm, "
             "QGemmCodes, MaxPoolCodes, AvgPoolCodes) named in order in steps, each step's X the output of the step "
             "before (the first's: X), its constant inputs (W, S, B) the next step_inputs[k] inputs, its attributes "
             "the node's attributes __<k>_<name>. Output: the last step's " + what + ".",
             [Param("X", "T", doc="the first step's X"),
              Param("C", "TC", Variadic, min_arity=1, homogeneous=False, doc="the steps' constant inputs in order")],
             [Param("Y", out_type)],
             [Attr("steps", AttrType.STRING, required=True, doc="the steps' op types, separated by spaces"),
              Attr("step_inputs", AttrType.INTS, required=True, doc="per step, its number of constant inputs"),
              Attr("step_values", AttrType.STRINGS, doc="the names of the values between the steps (not read by "
                   "the kernel; transforms/integer_chain.py's unchain gives the steps back as nodes)")],
             [conv_types[0], ("TC", ["tensor(int8)", "tensor(double)", "tensor(float)"], "W, S, B")], _infer_chain)
          for name, what, out_type in (("QChain", "float32 values", "tensor(float)"),
                                       ("QChainCodes", "int8 codes", "tensor(int8)"))),
        Op("QuantCodes", "Y = q - z of the act_* quantizer as float32 (integer mode's float-exact backend).",
           ins[:1], out, [*(a for a in _ACT if a.name != "relu"), _CHECK], (), _infer_same),
        Op("Rescale", "Y = float32(double(ACC) * S[j] + B[j]) with j along axis; relu: Y < 0 ? 0 : Y.",
           [Param("ACC", "tensor(float)"), ins[2], ins[3]], out,
           [Attr("axis", AttrType.INT, 1), Attr("relu", AttrType.INT, 0)], (), _infer_same),
    ]  # fmt: skip


def register() -> None:
    """Register the integer-mode schemas (idempotent)."""
    register_ops(ops(), DOMAINS)


__all__ = ["DOMAINS", "ops", "register"]
