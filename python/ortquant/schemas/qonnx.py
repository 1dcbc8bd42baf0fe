"""ONNX schemas of the QONNX ops in qonnx.custom_op.general, finn.custom_op.general and onnx.brevitas."""

from __future__ import annotations


def register() -> None:
    """Register the QONNX schemas (filled in per op)."""
