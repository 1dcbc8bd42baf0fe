"""ONNX schemas of linger's recurrent ops (LSTMInt, GRUInt and the seed's _Is8_Is64* names), registered in
``thinker`` and ``onnxinfer``, so ``onnx.checker`` (full check) and shape inference accept and type linger models.

As in the native library (decision 16) every name takes every input form: the longest list with trailing inputs
optional, and positions that hold different dtypes in different forms typed "any numeric". Output 0 is int8 with
``o_bits`` and float32 without; with a lengths input its time axis is max(lengths), unknown statically.
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
    input_elem_type,
    input_shape,
    register_ops,
    set_output,
)
from ortquant.schemas._builder import Optional as Opt

DOMAINS = ("thinker", "onnxinfer")
LSTM_NAMES = ("LSTMInt", "LSTMInt_Is8_Is64", "LSTMInt_Is8_Is64_If32_If32")
GRU_NAMES = ("GRUInt", "GRUInt_Is8_Is64", "GRUInt_Is8_Is64_If32")

ANY = ["tensor(int8)", "tensor(int32)", "tensor(int64)", "tensor(float)"]


def _attrs() -> list[Attr]:
    a = AttrType
    return [
        Attr("hidden_size", a.INT, required=True),
        Attr("input_size", a.INT, doc="checked against x and W_ih when given"),
        Attr("num_layers", a.INT, 1, doc="must be 1"),
        Attr("batch_first", a.INT, 0),
        Attr("go_forward", a.INT, 1, doc="0 = reverse direction"),
        Attr("go_gorward", a.INT, doc="the seed's spelling, read when go_forward is absent"),
        Attr("dropout", a.FLOAT, doc="ignored (evaluation)"),
        Attr("scale_i", a.FLOAT, required=True),
        Attr("scale_h", a.FLOAT, required=True),
        Attr("scale_iw", a.FLOAT, required=True),
        Attr("scale_hw", a.FLOAT, required=True),
        Attr("scale_o", a.FLOAT, doc="required with o_bits"),
        Attr("o_bits", a.INT, doc="absent: float32 output"),
        Attr("scale_io", a.FLOAT, doc="ignored"),
        Attr("scale_ho", a.FLOAT, doc="ignored"),
        Attr("data_bits", a.INT, 8),
        Attr("parameter_bits", a.INT, 8),
        Attr("platform_quant", a.STRING, "luna_quant", doc="only luna_quant is implemented"),
        Attr("table_len", a.INT, doc="validated, ignored (decision 13)"),
        Attr("sigmoid_bound", a.FLOAT, doc="validated, ignored (decision 13)"),
        Attr("tanh_bound", a.FLOAT, doc="validated, ignored (decision 13)"),
    ]


def _infer(outputs: int):
    def infer(ctx: onnx.shape_inference.InferenceContext) -> None:
        y = TensorProto.INT8 if attr(ctx, "o_bits") is not None else TensorProto.FLOAT
        bf = bool(attr(ctx, "batch_first", 0))
        h = attr(ctx, "hidden_size")
        hd = h if isinstance(h, int) and h > 0 else None
        x = input_shape(ctx, 0)
        b = t = None
        if x is not None and len(x) == 3:
            b, t = (x[0], x[1]) if bf else (x[1], x[0])
        if input_elem_type(ctx, 1) in (TensorProto.INT64, TensorProto.INT32):
            t = None  # max(lengths)
        set_output(ctx, 0, y, [b, t, hd] if bf else [t, b, hd])
        for o in range(1, min(outputs, ctx.get_num_outputs())):
            set_output(ctx, o, TensorProto.FLOAT, [1, b, hd])

    return infer


def _op(name: str, lstm: bool) -> Op:
    n_in = 8 if lstm else 7
    inputs = [Param("x", "tensor(int8)")]
    inputs += [Param(f"in{i}", f"T{i}") for i in (1, 2)]
    inputs += [Param(f"in{i}", f"T{i}", Opt) for i in range(3, n_in)]
    outs = [Param("output", "Y"), Param("hidden", "tensor(float)")]
    if lstm:
        outs.append(Param("cell", "tensor(float)"))
    forms = "lengths int64, (h0, c0) float32, W_ih, W_hh int8, B_ih, B_hh int32" if lstm else "lengths, h0, weights"
    return Op(
        name=name,
        doc=f"linger {'LSTMInt' if lstm else 'GRUInt'} (any input form: x, {forms}; see docs/ops.md).",
        inputs=inputs,
        outputs=outs,
        attrs=_attrs(),
        constraints=[(f"T{i}", ANY, "dtype depends on the input form") for i in range(1, n_in)]
        + [("Y", ["tensor(int8)", "tensor(float)"], "int8 with o_bits, float32 without")],
        infer=_infer(3 if lstm else 2),
    )


def register() -> None:
    """Register the recurrent op schemas in thinker and onnxinfer (idempotent)."""
    ops = [_op(n, True) for n in LSTM_NAMES] + [_op(n, False) for n in GRU_NAMES]
    register_ops(ops, DOMAINS)
