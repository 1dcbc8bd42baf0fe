"""Last step: initializers that no node reads any more (the shape of a Reshape a fusion removed, the parameters of a
quantizer whose codes now flow between layers) are dropped, so that onnxruntime does not warn about each at session
creation ("Removing initializer ... It is not used by any node").

An initializer is kept when any node reads it, a subgraph's included (subgraphs may read the outer graph's values),
when it is a graph output, or when it is also listed as a graph input (dropping it would turn an overridable
default into a required input). Returns ``model`` itself when nothing is dropped.
"""

from __future__ import annotations

import onnx

from ortquant.transforms._util import all_nodes, copy_model


def drop_unused_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop the top-level initializers nothing reads; see the module doc."""
    g = model.graph
    keep = {v for n in all_nodes(g) for v in n.input if v}
    keep |= {o.name for o in g.output} | {i.name for i in g.input}
    if all(t.name in keep for t in g.initializer):
        return model
    out = copy_model(model)
    kept = [t for t in out.graph.initializer if t.name in keep]
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept)
    return out


__all__ = ["drop_unused_initializers"]
