"""ONNX schemas of the QONNX ops, registered in qonnx.custom_op.general, finn.custom_op.general, onnx.brevitas.

Attributes that exporters always write but qonnx marks required are declared optional with the default our
kernels use (docs/ops.md), so models that omit them still pass the checker and run.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ortquant.schemas._builder import (
    Attr,
    AttrType,
    Op,
    Param,
    attr,
    broadcast,
    infer_broadcast,
    infer_same_as_input,
    input_elem_type,
    input_shape,
    register_ops,
    set_output,
)

DOMAINS = ("qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas")

F = "tensor(float)"
F16 = ["tensor(float)", "tensor(float16)"]
F16_F64 = ["tensor(float)", "tensor(float16)", "tensor(double)"]
INTS = [f"tensor({t})" for t in ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")]
BW = (
    "TB",
    ["tensor(float)", "tensor(int32)", "tensor(float16)", "tensor(double)", "tensor(int64)"],
    "bit width: float32, int32, float16, float64 or int64",
)

_ROUND = Attr(
    "rounding_mode", AttrType.STRING, "ROUND", doc="ROUND/HALF_EVEN, CEIL, FLOOR, UP, DOWN, HALF_UP, HALF_DOWN"
)


def _infer_f16_if(inputs: list[int], shape_inputs: list[int]):
    """Output 0: the broadcast shape of ``shape_inputs``; float16 when every input in ``inputs`` is float16, float32
    when one of them is float32, unset while one is unknown."""

    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        types = [input_elem_type(ctx, i) for i in inputs]
        if TensorProto.FLOAT in types or TensorProto.DOUBLE in types:
            et = TensorProto.FLOAT
        elif all(t == TensorProto.FLOAT16 for t in types):
            et = TensorProto.FLOAT16
        else:
            et = TensorProto.UNDEFINED
        set_output(ctx, 0, et, broadcast([input_shape(ctx, i) for i in shape_inputs]))

    return infer


def _quant(name: str) -> Op:
    return Op(
        name,
        "Integer quantize-dequantize: (clamp_round(X / scale + zeropt) - zeropt) * scale.",
        [Param("X", "TX"), Param("scale", "TS"), Param("zeropt", "TZ"), Param("bitwidth", "TB")],
        [Param("Y", F)],
        [
            Attr("signed", AttrType.INT, 1),
            Attr("narrow", AttrType.INT, 0),
            _ROUND,
        ],
        [
            ("TX", F16_F64, "float32, float16 or float64 (float16 and float64 do not mix)"),
            ("TS", [*F16_F64, *INTS], "float32, float16, float64 or an integer type (numpy's promotion)"),
            ("TZ", [*F16_F64, *INTS], "float32, float16, float64 or an integer type (numpy's promotion)"),
            BW,
        ],
        infer_broadcast([0, 1, 2, 3], TensorProto.FLOAT),
    )


# Trunc: X float32 with float32 scale/zeropt -> float32; X float16 with float32 scale/zeropt -> float32; all of X,
# scale, zeropt (and out_scale) float16 -> float16. The output is float16 exactly when scale is.
# float64 X/scale/zeropt/out_scale (and float64/int64 bit widths) give a float32 output (docs/ops.md).
_TRUNC_TYPES = [
    ("TX", F16_F64, "float32, float16 or float64"),
    ("TS", F16_F64, "scale: float32, float16 with a float16 X, or float64"),
    ("TZ", F16_F64, "zeropt: as scale"),
    ("TO", F16_F64, "out_scale: float32, float16 or float64"),
    ("TY", F16, "float16 when scale is float16, else float32"),
    BW,
]


def _trunc(name: str) -> list[Op]:
    v1 = Op(
        name,
        "Trunc v1: truncate the in_bitwidth integer to out_bitwidth, keep the input scale.",
        [
            Param("X", "TX"),
            Param("scale", "TS"),
            Param("zeropt", "TZ"),
            Param("in_bitwidth", "TB"),
            Param("out_bitwidth", "TB"),
        ],
        [Param("Y", "TY")],
        [Attr("rounding_mode", AttrType.STRING, "FLOOR")],
        [t for t in _TRUNC_TYPES if t[0] != "TO"],
        _infer_f16_if([1], [0, 1, 2, 3, 4]),
        since_version=1,
    )
    v2 = Op(
        name,
        "Trunc v2: requantize to out_scale (power-of-two ratio) and out_bitwidth with clamping.",
        [
            Param("X", "TX"),
            Param("scale", "TS"),
            Param("zeropt", "TZ"),
            Param("in_bitwidth", "TI"),
            Param("out_scale", "TO"),
            Param("out_bitwidth", "TB"),
        ],
        [Param("Y", "TY")],
        [
            Attr("rounding_mode", AttrType.STRING, "FLOOR"),
            Attr("signed", AttrType.INT, 1),
            Attr("narrow", AttrType.INT, 0),
        ],
        [*_TRUNC_TYPES, ("TI", BW[1], "not used")],
        _infer_f16_if([1], [0, 1, 2, 4, 5]),
        since_version=2,
    )
    return [v1, v2]


def _multithreshold_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    set_output(ctx, 0, input_elem_type(ctx, 0), input_shape(ctx, 0))


def _xnor_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    a, b = input_shape(ctx, 0), input_shape(ctx, 1)
    shape = None if a is None or b is None else [*a[:-1], b[-1]]
    set_output(ctx, 0, TensorProto.FLOAT, shape)


def _conv_out(
    size: int | str | None, k: int, stride: int, pad: int, dil: int, ceil: bool = False, pad_begin: int = 0
) -> int | None:
    if not isinstance(size, int):
        return None
    span = size + pad - dil * (k - 1) - 1
    if not ceil:
        return span // stride + 1
    out = -(-span // stride) + 1
    # ONNX/PyTorch rule: the last window must start inside the input or the leading padding.
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def _im2col_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    s = input_shape(ctx, 0)
    stride = list(attr(ctx, "stride"))
    k = list(attr(ctx, "kernel_size"))
    pads = list(attr(ctx, "pad_amount", [0, 0, 0, 0]))
    dil = list(attr(ctx, "dilations", [1, 1]))
    shape = None
    if s is not None and len(s) == 4:
        n, h, w, c = s
        oh = _conv_out(h, k[0], stride[0], pads[0] + pads[2], dil[0])
        ow = _conv_out(w, k[1], stride[1], pads[1] + pads[3], dil[1])
        ch = c * k[0] * k[1] if isinstance(c, int) else None
        shape = [n, oh, ow, ch]
    set_output(ctx, 0, input_elem_type(ctx, 0), shape)


def _maxpool_nhwc_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    s = input_shape(ctx, 0)
    k = list(attr(ctx, "kernel_shape"))
    pads = list(attr(ctx, "pads"))
    strides = list(attr(ctx, "strides"))
    ceil = bool(attr(ctx, "ceil_mode", 0))
    shape = None
    if s is not None and len(s) == 4:
        n, h, w, c = s
        shape = [
            n,
            _conv_out(h, k[0], strides[0], pads[0] + pads[2], 1, ceil, pads[0]),
            _conv_out(w, k[1], strides[1], pads[1] + pads[3], 1, ceil, pads[1]),
            c,
        ]
    set_output(ctx, 0, input_elem_type(ctx, 0), shape)


def _quantavgpool_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    s = input_shape(ctx, 0)
    k = int(attr(ctx, "kernel"))
    st = int(attr(ctx, "stride"))
    layout = attr(ctx, "data_layout", b"NCHW")
    layout = layout.decode() if isinstance(layout, bytes) else str(layout)
    shape = None
    if s is not None and len(s) == 4:
        if layout == "NHWC":
            n, h, w, c = s
            shape = [n, _conv_out(h, k, st, 0, 1), _conv_out(w, k, st, 0, 1), c]
        else:
            n, c, h, w = s
            shape = [n, c, _conv_out(h, k, st, 0, 1), _conv_out(w, k, st, 0, 1)]
    set_output(ctx, 0, TensorProto.FLOAT, shape)


# FloatQuant: all float32; X float16 with five float32 or five float16 parameters; or X float32/float64 with each
# parameter float32, float64, int32 or int64 (numpy's float64 steps, docs/ops.md). Each parameter has its own type
# variable (float64 and int64 ones mix); the kernel refuses the combinations outside these forms.
_FLOAT_QUANT_PARAMS = (
    ("scale", "TS"),
    ("exponent_bitwidth", "TE"),
    ("mantissa_bitwidth", "TM"),
    ("exponent_bias", "TB"),
    ("max_val", "TV"),
)
_FLOAT_QUANT_TYPES = ["tensor(float)", "tensor(float16)", "tensor(double)", "tensor(int32)", "tensor(int64)"]
_FLOAT_QUANT_PARAM_DOC = "float32 (float16 with a float16 X, all five alike), or float64, int32, int64"


def _float_quant_infer(ctx: onnx.shape_inference.InferenceContext) -> None:
    set_output(ctx, 0, TensorProto.FLOAT, broadcast([input_shape(ctx, i) for i in range(6)]))


def ops() -> list[Op]:
    """Every QONNX op schema (all versions)."""
    result = [
        _quant("Quant"),
        _quant("IntQuant"),
        Op(
            "BipolarQuant",
            "Binary quantization: Y = (X >= 0 ? +1 : -1) * scale; float16 when X and scale are, else float32.",
            [Param("X", "TX"), Param("scale", "TS")],
            [Param("Y", "TY")],
            constraints=[
                ("TX", F16_F64, "float32, float16 or float64 (float16 and float64 do not mix)"),
                ("TS", F16_F64, "float32, float16 or float64"),
                ("TY", F16, "float16 when X and scale are"),
            ],
            infer=_infer_f16_if([0, 1], [0, 1]),
        ),
        *_trunc("Trunc"),
        *_trunc("TruncQuant"),
        Op(
            "FloatQuant",
            "Minifloat quantize-dequantize with exponent/mantissa widths, bias and max value.",
            [Param("X", "TX"), *(Param(n, t) for n, t in _FLOAT_QUANT_PARAMS)],
            [Param("Y", F)],
            [
                _ROUND,
                Attr("has_inf", AttrType.INT, 0),
                Attr("has_nan", AttrType.INT, 0),
                Attr("has_subnormal", AttrType.INT, 0),
                Attr("saturation", AttrType.INT, 1),
            ],
            [
                ("TX", F16_F64, "float32, float16 or float64"),
                *((t, _FLOAT_QUANT_TYPES, f"{n}: {_FLOAT_QUANT_PARAM_DOC}") for n, t in _FLOAT_QUANT_PARAMS),
            ],
            infer=_float_quant_infer,
        ),
        Op(
            "MultiThreshold",
            "Y = out_scale * (number of thresholds of X's channel that are <= X) + out_bias.",
            [Param("X", "T"), Param("thresholds", "TT")],
            [Param("Y", "T")],
            [
                Attr("out_dtype", AttrType.STRING, ""),
                Attr("out_scale", AttrType.FLOAT, 1.0),
                Attr("out_bias", AttrType.FLOAT, 0.0),
                Attr("data_layout", AttrType.STRING, "NCHW"),
            ],
            [
                ("T", ["tensor(float)"], "float32"),
                ("TT", ["tensor(float)", "tensor(double)", "tensor(int64)"], "float32, float64 or int64"),
            ],
            _multithreshold_infer,
        ),
        Op(
            "XnorPopcountMatMul",
            "Binary matmul on {0,1} operands: number of agreeing bits.",
            [Param("A", F), Param("B", F)],
            [Param("Y", F)],
            infer=_xnor_infer,
        ),
        Op(
            "Im2Col",
            "NHWC image to (N, OH, OW, KH*KW*C) patches, inner order (kh, kw, c).",
            [Param("X", "T")],
            [Param("Y", "T")],
            [
                Attr("stride", AttrType.INTS, required=True),
                Attr("kernel_size", AttrType.INTS, required=True),
                Attr("input_shape", AttrType.STRING, doc="only for qonnx's shape inference; unused"),
                Attr("pad_amount", AttrType.INTS, [0, 0, 0, 0]),
                Attr("pad_value", AttrType.INT, 0),
                Attr("depthwise", AttrType.INT, 0),
                Attr("dilations", AttrType.INTS, [1, 1]),
            ],
            [("T", ["tensor(float)"], "float32")],
            _im2col_infer,
        ),
        Op(
            "MaxPoolNHWC",
            "Max pooling on NHWC tensors (ONNX MaxPool semantics, -inf padding).",
            [Param("X", "T")],
            [Param("Y", "T")],
            [
                Attr("kernel_shape", AttrType.INTS, required=True),
                Attr("pads", AttrType.INTS, required=True),
                Attr("strides", AttrType.INTS, required=True),
                Attr("ceil_mode", AttrType.INT, 0),
            ],
            [("T", ["tensor(float)"], "float32")],
            _maxpool_nhwc_infer,
        ),
        Op(
            "QuantAvgPool2d",
            "FINN's integer average pool: sum over the window, then an arithmetic right shift.",
            [Param("X", F)],
            [Param("Y", F)],
            [
                Attr("stride", AttrType.INT, required=True),
                Attr("kernel", AttrType.INT, required=True),
                Attr("ibits", AttrType.INT, required=True),
                Attr("obits", AttrType.INT, required=True),
                Attr("signed", AttrType.INT),
                Attr("data_layout", AttrType.STRING, "NCHW"),
            ],
            infer=_quantavgpool_infer,
        ),
        Op(
            "DebugMarker",
            "Identity that marks a tensor for debugging.",
            [Param("X", "T")],
            [Param("Y", "T")],
            [Attr("export_debug_name", AttrType.STRING, required=True)],
            [("T", ["tensor(float)"], "float32")],
            infer_same_as_input(0),
        ),
    ]
    return result


def register() -> None:
    """Register the QONNX schemas in all three QONNX domains (idempotent)."""
    register_ops(ops(), DOMAINS)


__all__ = ["DOMAINS", "ops", "register"]
