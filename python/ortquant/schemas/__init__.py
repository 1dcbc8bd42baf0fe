"""ONNX op schemas for every op ortquant registers, so onnx.checker and shape inference accept our models.

Nothing is registered on ``import ortquant``: :func:`register_schemas` does it, explicitly or from the ortquant
functions that need typed custom-op outputs (``prepare_model``'s shape inference). One module per family.
"""

from __future__ import annotations

import atexit
import threading

_lock = threading.Lock()
_done = False


def _settle_onnx_reference() -> None:
    """Let ``onnx.reference`` build its op table before ours are in ``onnx.defs``.

    onnx.reference indexes every registered schema by bare op name when it is first imported and refuses names
    that exist in two domains (ours do: QONNX ops in three domains, linger ops in thinker and onnxinfer, and
    thinker::Relu next to ONNX's Relu). Importing it first makes the order of imports irrelevant: its table then
    holds the standard schemas only, which is all it implements.
    """
    try:
        import onnx.reference  # noqa: F401
    except Exception:  # pragma: no cover - an onnx without the reference evaluator has nothing to protect
        pass


def register_schemas() -> None:
    """Register all ortquant op schemas with ``onnx.defs`` (idempotent, thread-safe).

    A process-wide change: afterwards ``onnx.checker.check_model(model, full_check=True)`` and
    ``onnx.shape_inference.infer_shapes`` know ortquant's ops. It leaves ``onnx.reference`` (and so onnxscript,
    qonnx's transformations) working whatever is imported later.
    """
    global _done
    with _lock:
        if _done:
            return
        _settle_onnx_reference()
        from ortquant.schemas import integer, linger, linger_matrix, linger_rnn, ngraph, qonnx

        qonnx.register()
        ngraph.register()
        linger.register()
        linger_matrix.register()
        linger_rnn.register()
        integer.register()
        _done = True
        # Removed again before the interpreter finalizes: onnx 1.19-1.22 destroy the schema registry, and the
        # Python inference functions it holds, after Python has shut down (a hang or a segmentation fault at
        # exit); taken out while Python runs, they are released normally.
        atexit.register(_deregister)


def _deregister() -> None:
    import onnx.defs

    from ortquant.schemas._builder import REGISTERED

    for name, version, domain in reversed(REGISTERED):
        try:
            onnx.defs.deregister_schema(name, version, domain)
        except Exception:  # already gone (or an onnx without deregistration): nothing to release
            continue
    REGISTERED.clear()
