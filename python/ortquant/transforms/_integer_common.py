"""What the integer-mode lowering rules (``lower_integer`` and its ``integer_*`` modules) share."""

from __future__ import annotations


class SkipError(Exception):
    """This layer stays on the float path (the message says why)."""


class TypeSkipError(SkipError):
    """A quantizer the fused quantizer does not take as it is (a parameter's element type, e.g. a float64 scale, or
    per-channel scales before a layer that sums channels): the layer may still run on the grid path, which reads
    the quantizer's output instead."""


class NoQuantizerError(SkipError):
    """No Quant / BipolarQuant right before the layer's activation (the grid path may still take it)."""


class NoGridError(SkipError):
    """The value is on no integer grid the analysis knows."""
