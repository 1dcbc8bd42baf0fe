"""ONNX schemas of nGraph Quantize/Dequantize (domain ``ngraph``)."""

from __future__ import annotations

from ortquant.schemas._builder import Attr, AttrType, Op, Param, input_elem_type, input_shape, register_ops, set_output

DOMAINS = ("ngraph",)

_QTYPES = ["tensor(int8)", "tensor(uint8)", "tensor(int16)", "tensor(uint16)", "tensor(int32)"]
_RTYPES = ["tensor(float)", "tensor(float16)"]


def _quantize_infer(ctx) -> None:  # type: ignore[no-untyped-def]
    set_output(ctx, 0, input_elem_type(ctx, 2), input_shape(ctx, 0))


def ops() -> list[Op]:
    """The nGraph op schemas."""
    return [
        Op(
            "Quantize",
            "q = saturate(round(input / scale) + zero_point) to zero_point's type; scale/zero_point per `axes`.",
            [Param("input", "R"), Param("scale", "R"), Param("zero_point", "Q")],
            [Param("output", "Q")],
            [
                Attr("axes", AttrType.INTS, []),
                Attr("round_mode", AttrType.STRING, required=True),
                Attr("type", AttrType.STRING),
            ],
            [("R", _RTYPES, "real type"), ("Q", _QTYPES, "quantized type")],
            _quantize_infer,
        ),
        Op(
            "Dequantize",
            "output = (input - zero_point) * scale, the difference computed exactly in 64-bit integers.",
            [Param("input", "Q"), Param("scale", "R"), Param("zero_point", "Q")],
            [Param("output", "R")],
            [Attr("axes", AttrType.INTS, []), Attr("type", AttrType.STRING)],
            [("R", _RTYPES, "real type"), ("Q", _QTYPES, "quantized type")],
            lambda ctx: set_output(ctx, 0, input_elem_type(ctx, 1), input_shape(ctx, 0)),
        ),
    ]


def register() -> None:
    """Register the nGraph schemas (idempotent)."""
    register_ops(ops(), DOMAINS)


__all__ = ["DOMAINS", "ops", "register"]
