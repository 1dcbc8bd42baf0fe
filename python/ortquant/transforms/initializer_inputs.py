"""Rewrite: initializers that are also listed as graph inputs become plain constants.

Exports from torch (``keep_initializers_as_inputs``, the default of older exporters) and FINN list every weight as
a graph input as well as an initializer. onnxruntime then treats each such weight as overridable at run time: the
weight quantizers run on every inference, nothing is pre-packed, Conv + BatchNormalization is not folded, and
integer mode cannot read constant weights. Nobody feeds weights at run time in practice, so ortquant drops those
graph inputs by default (what onnxruntime's ``remove_initializer_from_input.py`` and qonnx's ``cleanup`` do); the
values are unchanged, only the option to override them goes. ``overridable_initializers=True``
(``ortquant.InferenceSession``, ``prepare_model``; ``ortquant prepare --overridable-initializers``) keeps the model as
it is for the rare user who does feed them. Returns ``model`` itself when no graph input has an initializer.
"""

from __future__ import annotations

import onnx

from ortquant.transforms._util import copy_model


def initializer_inputs(model: onnx.ModelProto) -> list[str]:
    """Names of the top-level graph inputs that are initializers too (overridable weights)."""
    inits = {t.name for t in model.graph.initializer} | {t.name for t in model.graph.sparse_initializer}
    return [i.name for i in model.graph.input if i.name in inits]


def constant_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop the graph inputs that name an initializer, so onnxruntime and ortquant see constant weights."""
    names = set(initializer_inputs(model))
    if not names:
        return model
    out = copy_model(model)
    kept = [i for i in out.graph.input if i.name not in names]
    del out.graph.input[:]
    out.graph.input.extend(kept)
    return out
