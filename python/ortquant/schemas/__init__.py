"""ONNX op schemas for every op ortquant registers, so onnx.checker and shape inference accept our models.

Registered once on import of :mod:`ortquant` (idempotent). One module per family.
"""

from __future__ import annotations

_done = False


def register_schemas() -> None:
    """Register all ortquant op schemas with ``onnx.defs`` (safe to call repeatedly)."""
    global _done
    if _done:
        return
    from ortquant.schemas import integer, linger, linger_matrix, linger_rnn, ngraph, qonnx

    qonnx.register()
    ngraph.register()
    linger.register()
    linger_matrix.register()
    linger_rnn.register()
    integer.register()
    _done = True
