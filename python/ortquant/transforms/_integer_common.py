"""What the integer-mode lowering rules (``lower_integer`` and its ``integer_*`` modules) share."""

from __future__ import annotations


class SkipError(Exception):
    """This layer stays on the float path (the message says why)."""


class TypeSkipError(SkipError):
    """A quantizer's parameter has an element type the fused quantizer does not take (e.g. a float64 scale): the
    layer may still run on the grid path, which reads the quantizer's output instead."""


class NoQuantizerError(SkipError):
    """No Quant / BipolarQuant right before the layer's activation (the grid path may still take it)."""


class NoGridError(SkipError):
    """The value is on no integer grid the analysis knows."""
