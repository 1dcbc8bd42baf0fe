"""ONNX schemas of the linger / thinker ops, registered in ``thinker`` (what linger writes) and
``onnxinfer`` (the seed's runtime domain), so ``onnx.checker`` (full check) and shape inference accept and type
linger models.

Every attribute linger 1.1.1 (or the seed's older exporter) writes is declared; attributes ortquant reads with a
default are optional here. Output types that depend on an attribute (Quant ``data_bits``, Requant / BatchNorm /
SoftmaxInt ``o_bits``) are inferred from it, as the native library does.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
from onnx import TensorProto

from ortquant.schemas._builder import (
    Attr,
    AttrType,
    Op,
    Param,
    Variadic,
    attr,
    broadcast,
    infer_same_as_input,
    input_shape,
    register_ops,
    set_output,
)
from ortquant.schemas._builder import Optional as Opt

DOMAINS = ("thinker", "onnxinfer")

I8 = "tensor(int8)"
INT_TYPES = ["tensor(int8)", "tensor(int16)", "tensor(int32)"]
MAX_CAT_INPUTS = 256  # iqCat declares scale_x_0 .. scale_x_255

# (a string: onnx before 1.19 has no InferenceContext, and no Python inference functions at all)
Infer = Callable[["onnx.shape_inference.InferenceContext"], None]


def _platform() -> Attr:
    return Attr("platform_quant", AttrType.STRING, "luna_quant", doc="only luna_quant is implemented")


def _req_float(name: str, doc: str = "") -> Attr:
    return Attr(name, AttrType.FLOAT, required=True, doc=doc)


def _opt_float(name: str, doc: str = "") -> Attr:
    return Attr(name, AttrType.FLOAT, doc=doc)


def _bits_type(bits: object, default: int) -> int:
    b = int(bits) if isinstance(bits, int) else default
    return TensorProto.INT8 if b <= 8 else (TensorProto.INT16 if b <= 16 else TensorProto.INT32)


def _bits_output(name: str, default: int, float_if_absent: bool = False) -> Infer:
    """Output 0: input 0's shape, the integer type of attribute ``name`` (float32 when absent and asked)."""

    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        b = attr(ctx, name)
        et = TensorProto.FLOAT if (b is None and float_if_absent) else _bits_type(b, default)
        set_output(ctx, 0, et, input_shape(ctx, 0))

    return infer


def _fixed_output(elem_type: int) -> Infer:
    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        set_output(ctx, 0, elem_type, input_shape(ctx, 0))

    return infer


def _broadcast_i8(ctx: onnx.shape_inference.InferenceContext) -> None:
    try:
        shape = broadcast([input_shape(ctx, 0), input_shape(ctx, 1)])
    except ValueError:
        shape = None
    set_output(ctx, 0, TensorProto.INT8, shape)


def _cat_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    shapes = [input_shape(ctx, i) for i in range(ctx.get_num_inputs())]
    if not shapes or any(s is None for s in shapes) or len({len(s) for s in shapes}) != 1:  # type: ignore[arg-type]
        set_output(ctx, 0, TensorProto.INT8, None)
        return
    rank = len(shapes[0])  # type: ignore[arg-type]
    dim = int(attr(ctx, "dim", 0))  # type: ignore[arg-type]
    axis = dim + rank if dim < 0 else dim
    if not 0 <= axis < rank:
        set_output(ctx, 0, TensorProto.INT8, None)
        return
    out = list(shapes[0])  # type: ignore[arg-type]
    sizes = [s[axis] for s in shapes]  # type: ignore[index]
    out[axis] = sum(sizes) if all(isinstance(v, int) for v in sizes) else None  # type: ignore[arg-type]
    set_output(ctx, 0, TensorProto.INT8, out)


def _sum_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    shape = input_shape(ctx, 0)
    if shape is None:
        set_output(ctx, 0, TensorProto.INT8, None)
        return
    dims = attr(ctx, "dims")
    axes = [] if dims is None else ([dims] if isinstance(dims, int) else list(dims))  # type: ignore[arg-type]
    rank = len(shape)
    red = {(a + rank if a < 0 else a) for a in axes} if axes else set(range(rank))
    keep = bool(attr(ctx, "keepdims", 0))
    out = [1 if i in red else d for i, d in enumerate(shape) if keep or i not in red]
    set_output(ctx, 0, TensorProto.INT8, out)


def _pad_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    shape = input_shape(ctx, 0)
    set_output(ctx, 0, TensorProto.INT8, None if shape is None else [None] * len(shape))


def _pool_size(n: int, k: int, s: int, pb: int, pe: int, ceil_mode: bool) -> int:
    span = n + pb + pe - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + pb:
        out -= 1
    return out


def _avgpool_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    shape = input_shape(ctx, 0)
    if shape is None or len(shape) != 4:
        set_output(ctx, 0, TensorProto.INT8, None)
        return
    k = list(attr(ctx, "kernel_shape", []))  # type: ignore[call-overload]
    s = list(attr(ctx, "strides", [1, 1]))  # type: ignore[call-overload]
    p = list(attr(ctx, "pads", [0, 0, 0, 0]))  # type: ignore[call-overload]
    if len(p) == 2:
        p = p + p
    ceil = bool(attr(ctx, "ceil_mode", 0))
    out: list[int | str | None] = [shape[0], shape[1], None, None]
    for a in range(2):
        n = shape[2 + a]
        if isinstance(n, int) and len(k) == 2 and len(s) == 2 and len(p) == 4:
            out[2 + a] = _pool_size(n, k[a], s[a], p[a], p[a + 2], ceil)
    set_output(ctx, 0, TensorProto.INT8, out)


def ops() -> list[Op]:
    """The linger op schemas."""
    scale_xyo = [_req_float("scale_x"), _req_float("scale_y"), _req_float("scale_o"), _platform()]
    bn_attrs = [
        Attr("data_bits", AttrType.INT, 8),
        Attr("parameter_bits", AttrType.INT, 8),
        Attr("o_bits", AttrType.INT, 8),
        _opt_float("scale_x", "1.1.1 layout"),
        _opt_float("scale_w", "1.1.1 layout"),
        _opt_float("scale_o", "1.1.1 layout"),
        *[_opt_float(n, "the seed's older layout") for n in
          ("scale_mul_x", "scale_mul_w", "scale_mul_o", "scale_add_b", "scale_add_o")],
        _platform(),
    ]  # fmt: skip
    bn_inputs = [
        Param("x", I8),
        Param("weight", "TW", doc="int8 q_alpha [C] (1.1.1) or mul_w (seed)"),
        Param("bias", "TB", doc="int32 q_beta [C] (1.1.1) or add_b (seed)"),
        Param("running_mean", "tensor(float)", Opt, doc="unused"),
        Param("running_var", "tensor(float)", Opt, doc="unused"),
    ]
    bn_constraints = [
        ("TW", [*INT_TYPES, "tensor(int64)"], "integer weight"),
        ("TB", [*INT_TYPES, "tensor(int64)"], "integer bias"),
        ("TO", INT_TYPES, "int8/int16/int32 by o_bits"),
    ]
    softmax_attrs = [
        _req_float("scale_x"),
        Attr("data_bits", AttrType.INT, 8),
        Attr("dim", AttrType.INT, required=True),
        _opt_float("scale_o", "with o_bits; both absent: float32 output"),
        Attr("o_bits", AttrType.INT),
        _platform(),
    ]
    softmax_constraints = [
        ("T", ["tensor(int8)", "tensor(int16)"], "input"),
        ("TO", [*INT_TYPES, "tensor(float)"], "int by o_bits, float32 without o_bits"),
    ]
    activation_attrs = [
        _req_float("scale_x", "scale of the (int16) input; Q11 = x * 2048 / scale_x"),
        _opt_float("scale_o", "must be 128 (Q7)"),
        Attr("castor_mode", AttrType.STRING, "luna"),
        _platform(),
        Attr("table_len", AttrType.INT, doc="seed attribute: validated, otherwise ignored"),
        _opt_float("sigmoid_bound", "seed attribute: validated, otherwise ignored"),
        _opt_float("tanh_bound", "seed attribute: validated, otherwise ignored"),
    ]
    return [
        Op(
            "Quant",
            "q = clamp(floor(fl32(fl32(x * scale_x) + 0.5)), data_bits range); int8/int16/int32 by data_bits.",
            [Param("x", "tensor(float)")],
            [Param("y", "TO")],
            [Attr("data_bits", AttrType.INT, 8), _req_float("scale_x"), _platform()],
            [("TO", INT_TYPES, "int8/int16/int32 by data_bits")],
            _bits_output("data_bits", 8),
        ),
        Op(
            "Dequant",
            "y = float32(x) / scale_o; a float32 input passes through (linger writes Dequant(scale_o=1.0) after "
            "float outputs).",
            [Param("x", "T")],
            [Param("y", "tensor(float)")],
            [_opt_float("scale_o"), _opt_float("scale_x", "used when scale_o is absent"), _platform()],
            [("T", [*INT_TYPES, "tensor(float)"], "quantized or float input")],
            _fixed_output(TensorProto.FLOAT),
        ),
        Op(
            "Requant",
            "y = saturate(floor(x * scale_o / scale_x + 1/2), o_bits); int8/int16/int32 by o_bits.",
            [Param("x", "TI")],
            [Param("y", "TO")],
            [
                Attr("data_bits", AttrType.INT, required=True),
                Attr("o_bits", AttrType.INT, required=True),
                _req_float("scale_x"),
                _req_float("scale_o"),
                _platform(),
            ],
            [("TI", INT_TYPES, "int by data_bits"), ("TO", INT_TYPES, "int by o_bits")],
            _bits_output("o_bits", 8),
        ),
        Op(
            "iqAdd",
            "int8 y: saturate8(rq(x, so/sx) + rq(y, so/sy)); float32 y: linger's float32 path.",
            [Param("x", I8), Param("y", "T")],
            [Param("z", I8)],
            [*scale_xyo, Attr("mode", AttrType.STRING, "Non_t710_mode")],
            [("T", [I8, "tensor(float)"], "int8 tensor or float32 constant")],
            _broadcast_i8,
        ),
        Op(
            "iqMul",
            "int8 y: saturate8(floor(x*y*so/(sx*sy) + 1/2)); float32 y: float32 path.",
            [Param("x", I8), Param("y", "T")],
            [Param("z", I8)],
            scale_xyo,
            [("T", [I8, "tensor(float)"], "int8 tensor or constant, or float32")],
            _broadcast_i8,
        ),
        Op(
            "iqDiv",
            "linger's float32 division x/sx / (y/sy) requantized to scale_o; division by zero gives -128.",
            [Param("x", I8), Param("y", "T")],
            [Param("z", I8)],
            scale_xyo,
            [("T", [I8, "tensor(float)"], "int8 tensor or float32 constant")],
            _broadcast_i8,
        ),
        Op(
            "iqCat",
            "Each input requantized from scale_x_i to scale_o, then concatenated along dim.",
            [Param("inputs", I8, Variadic, min_arity=1)],
            [Param("y", I8)],
            [
                _req_float("scale_o"),
                Attr("dim", AttrType.INT, required=True),
                _platform(),
                *[_opt_float(f"scale_x_{i}", "scale of input i") for i in range(MAX_CAT_INPUTS)],
            ],
            (),
            _cat_infer,
        ),
        Op(
            "iqClamp",
            "Requant to scale_o, clamped to [max(-128, ceil(min*so)), min(127, floor(max*so))].",
            [Param("x", I8)],
            [Param("y", I8)],
            [_req_float("min"), _req_float("max"), _req_float("scale_x"), _req_float("scale_o"), _platform()],
            (),
            _fixed_output(TensorProto.INT8),
        ),
        Op(
            "iqSigmoid",
            "Q11 input (saturated to int16), 16-segment sigmoid table, int8 output in [0, 127] at scale 128.",
            [Param("x", "T")],
            [Param("y", I8)],
            activation_attrs,
            [("T", ["tensor(int16)", "tensor(int8)"], "int16 (linger) or int8 (seed)")],
            _fixed_output(TensorProto.INT8),
        ),
        Op(
            "iqTanh",
            "Q11 input (saturated to int16), 16-segment tanh table, int8 output at scale 128.",
            [Param("x", "T")],
            [Param("y", I8)],
            activation_attrs,
            [("T", ["tensor(int16)", "tensor(int8)"], "int16 (linger) or int8 (seed)")],
            _fixed_output(TensorProto.INT8),
        ),
        Op(
            "iqSum",
            "Exact integer sum over dims (absent: all axes), requantized to scale_o.",
            [Param("x", I8)],
            [Param("y", I8)],
            [
                _req_float("scale_x"),
                _req_float("scale_o"),
                Attr("dims", AttrType.INT, doc="the axis as linger writes x.sum(1) (an INTS form fails the checker)"),
                Attr("keepdims", AttrType.INT, 0, doc="ortquant extension; linger never writes it"),
                _platform(),
            ],
            (),
            _sum_infer,
        ),
        Op(
            "iqPad",
            "ONNX Pad in constant mode on int8: pads [b_0..b_{r-1}, e_0..e_{r-1}], pad value input (linger: 0).",
            [Param("x", I8), Param("pads", "tensor(int64)"), Param("value", I8, Opt)],
            [Param("y", I8)],
            [Attr("mode", AttrType.STRING, "constant")],
            (),
            _pad_infer,
        ),
        Op(
            "Relu",
            "y = x < 0 ? 0 : x on int8, int32 or float32 (what prepare_model moves int8 default-domain Relu to).",
            [Param("x", "T")],
            [Param("y", "T")],
            [],
            [("T", ["tensor(int8)", "tensor(int32)", "tensor(float)"], "int8, int32 or float32")],
            infer_same_as_input(0),
        ),
        Op(
            "AvgPool2dInt",
            "NCHW int8 average pooling, linger's floor(rint(S/d*K)/K + 0.5); output scale = input scale.",
            [Param("x", I8)],
            [Param("y", I8)],
            [
                Attr("kernel_shape", AttrType.INTS, required=True),
                Attr("strides", AttrType.INTS),
                Attr("pads", AttrType.INTS),
                Attr("ceil_mode", AttrType.INT, 0),
                Attr("data_bits", AttrType.INT, 8),
                Attr("o_bits", AttrType.INT),
                _req_float("scale_x"),
                _opt_float("scale_o", "equals scale_x"),
                Attr("dilations", AttrType.INTS),
                Attr("count_include_pad", AttrType.INT, 1),
                _platform(),
            ],
            (),
            _avgpool_infer,
        ),
        *[
            Op(
                name,
                "saturate(floor((x*w[c] + b[c]) * so/(sx*sw) + 1/2), o_bits) on channel axis 1 (or the seed's "
                "mul_w/add_b layout, decision 15).",
                bn_inputs,
                [Param("y", "TO")],
                bn_attrs,
                bn_constraints,
                _bits_output("o_bits", 8),
            )
            for name in ("BatchNorm2dInt", "BatchNorm1dInt")
        ],
        Op(
            "SoftmaxInt",
            "linger's integer softmax along dim (linger-extra.md section 1).",
            [Param("x", "T")],
            [Param("y", "TO")],
            softmax_attrs,
            softmax_constraints,
            _bits_output("o_bits", 8, float_if_absent=True),
        ),
        Op(
            "LogSoftmaxInt",
            "linger's integer log-softmax along dim (linger-extra.md section 2).",
            [Param("x", "T")],
            [Param("y", "TO")],
            softmax_attrs,
            softmax_constraints,
            _bits_output("o_bits", 8, float_if_absent=True),
        ),
        Op(
            "LayerNormInt",
            "Not supported: linger 1.1.1 has no reference semantics for it (the native kernel refuses the node).",
            [Param("inputs", "T", Variadic, min_arity=1, homogeneous=False)],
            [Param("y", I8)],
            [
                Attr("data_bits", AttrType.INT),
                Attr("parameter_bits", AttrType.INT),
                Attr("o_bits", AttrType.INT),
                _opt_float("scale_x"),
                _opt_float("scale_w"),
                _opt_float("scale_o"),
                _opt_float("eps"),
                _platform(),
            ],
            [("T", [*INT_TYPES, "tensor(float)", "tensor(int64)"], "any")],
            _fixed_output(TensorProto.INT8),
        ),
    ]


def register() -> None:
    """Register the linger schemas in the thinker and onnxinfer domains (idempotent)."""
    register_ops(ops(), DOMAINS)


__all__ = ["DOMAINS", "ops", "register"]
