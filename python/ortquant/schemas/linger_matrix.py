"""ONNX schemas of the linger matrix ops (LinearInt, BmmInt, Conv2dInt, Conv1dInt, ConvTranspose2dInt) in the
``thinker`` and ``onnxinfer`` domains: every attribute linger 1.1.1 writes; output int8/int16/int32 by ``o_bits``,
float32 without it."""

from __future__ import annotations

from collections.abc import Sequence

import onnx
from onnx import TensorProto

from ortquant.schemas._builder import Attr, AttrType, Op, Optional, Param, attr, input_shape, register_ops, set_output

DOMAINS = ("thinker", "onnxinfer")

I8 = "tensor(int8)"
I32 = "tensor(int32)"
_OUT = ("T", ["tensor(int8)", "tensor(int16)", "tensor(int32)", "tensor(float)"], "int8/16/32 by o_bits, else float")

_COMMON = [
    Attr("data_bits", AttrType.INT, 8),
    Attr("platform_quant", AttrType.STRING, "luna_quant"),
    Attr("o_bits", AttrType.INT),
    Attr("scale_o", AttrType.FLOAT),
]
_WEIGHTED = [*_COMMON, Attr("scale_x", AttrType.FLOAT, required=True), Attr("scale_w", AttrType.FLOAT, required=True),
             Attr("parameter_bits", AttrType.INT, 8)]  # fmt: skip
_CONV = [
    *_WEIGHTED,
    Attr("kernel_shape", AttrType.INTS),
    Attr("strides", AttrType.INTS),
    Attr("pads", AttrType.INTS),
    Attr("dilations", AttrType.INTS),
    Attr("group", AttrType.INT, 1),
    Attr("castor_mode", AttrType.STRING),
]

Dim = int | str | None


def _out_type(ctx: onnx.shape_inference.InferenceContext) -> int:
    bits = attr(ctx, "o_bits")
    if bits is None:
        return TensorProto.FLOAT
    return TensorProto.INT8 if bits <= 8 else (TensorProto.INT16 if bits <= 16 else TensorProto.INT32)


def _ints(ctx: onnx.shape_inference.InferenceContext, name: str, n: int, dflt: int) -> list[int]:
    v = attr(ctx, name)
    return list(v) if v is not None and len(v) == n else [dflt] * n


def _infer_linear(ctx: onnx.shape_inference.InferenceContext) -> None:
    x, w = input_shape(ctx, 0), input_shape(ctx, 1)
    if x is None or not x:
        set_output(ctx, 0, _out_type(ctx), None)
        return
    set_output(ctx, 0, _out_type(ctx), [*x[:-1], w[0] if w is not None and len(w) == 2 else None])


def _infer_bmm(ctx: onnx.shape_inference.InferenceContext) -> None:
    x, y = input_shape(ctx, 0), input_shape(ctx, 1)
    if x is None or len(x) < 2:
        set_output(ctx, 0, _out_type(ctx), None)
        return
    set_output(ctx, 0, _out_type(ctx), [*x[:-1], y[-1] if y is not None and len(y) == len(x) else None])


def _spatial(x: Sequence[Dim], k: Sequence[int] | None, s: list[int], d: list[int], p: list[int], transposed: bool,
             op: list[int]) -> list[Dim]:  # fmt: skip
    r = len(s)
    out: list[Dim] = []
    for i in range(r):
        n = x[2 + i]
        if not isinstance(n, int) or k is None or not isinstance(k[i], int):
            out.append(None)
        elif transposed:
            out.append((n - 1) * s[i] + d[i] * (k[i] - 1) + 1 + op[i] - p[i] - p[i + r])
        else:
            out.append((n + p[i] + p[i + r] - d[i] * (k[i] - 1) - 1) // s[i] + 1)
    return out


def _infer_conv(rank: int, transposed: bool = False):
    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        x, w = input_shape(ctx, 0), input_shape(ctx, 1)
        if x is None or len(x) != rank + 2:
            set_output(ctx, 0, _out_type(ctx), None)
            return
        have_w = w is not None and len(w) == rank + 2
        k = attr(ctx, "kernel_shape")
        if (k is None or len(k) != rank) and have_w:
            k = w[2:]
        s = _ints(ctx, "strides", rank, 1)
        d = _ints(ctx, "dilations", rank, 1)
        p = _ints(ctx, "pads", 2 * rank, 0)
        op = _ints(ctx, "output_padding", rank, 0)
        if not have_w:
            m: Dim = None
        elif transposed:
            m = w[1] * int(attr(ctx, "group", 1)) if isinstance(w[1], int) else None
        else:
            m = w[0]
        set_output(ctx, 0, _out_type(ctx), [x[0], m, *_spatial(x, k, s, d, p, transposed, op)])

    return infer


def ops() -> list[Op]:
    """The linger matrix-op schemas."""
    xwb = [Param("X", I8), Param("W", I8), Param("B", I32, Optional)]
    out = [Param("Y", "T")]
    return [
        Op("LinearInt", "Y = requant(X . W^T + B), W [N, K] (torch layout), any leading dims of X.", xwb, out,
           _WEIGHTED, [_OUT], _infer_linear),
        Op("BmmInt", "Y = requant(X @ Y2), X [..., N, M], Y2 [..., M, P].", [Param("X", I8), Param("Y", I8)], out,
           [*_COMMON, Attr("scale_x", AttrType.FLOAT, required=True), Attr("scale_y", AttrType.FLOAT, required=True)],
           [_OUT], _infer_bmm),
        Op("Conv2dInt", "Y = requant(conv2d(X, W) + B), NCHW, pads [t, l, b, r].", xwb, out, _CONV, [_OUT],
           _infer_conv(2)),
        Op("Conv1dInt", "Y = requant(conv1d(X, W) + B), NCL, pads [begin, end].", xwb, out, _CONV, [_OUT],
           _infer_conv(1)),
        Op("ConvTranspose2dInt", "Y = requant(conv_transpose2d(X, W) + B), W [C, M/group, kH, kW], torch pads.",
           xwb, out, [*_CONV, Attr("output_padding", AttrType.INTS)], [_OUT], _infer_conv(2, transposed=True)),
    ]  # fmt: skip


def register() -> None:
    """Register the linger matrix-op schemas (idempotent)."""
    register_ops(ops(), DOMAINS)


__all__ = ["DOMAINS", "ops", "register"]
