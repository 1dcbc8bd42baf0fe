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


def unread_initializers(graph: onnx.GraphProto) -> set[str]:
    """The names of ``graph``'s initializers that no node (a subgraph's included) reads and that are neither graph
    outputs nor listed as graph inputs."""
    keep = {v for n in all_nodes(graph) for v in n.input if v}
    keep |= {o.name for o in graph.output} | {i.name for i in graph.input}
    return {t.name for t in graph.initializer if t.name not in keep}


def keep_read_initializers(graph: onnx.GraphProto) -> None:
    """Drop :func:`unread_initializers` from ``graph`` in place."""
    unread = unread_initializers(graph)
    if unread:
        kept = [t for t in graph.initializer if t.name not in unread]
        del graph.initializer[:]
        graph.initializer.extend(kept)


def drop_unused_initializers(model: onnx.ModelProto) -> onnx.ModelProto:
    """Drop the top-level initializers nothing reads; see the module doc."""
    if not unread_initializers(model.graph):
        return model
    out = copy_model(model)
    keep_read_initializers(out.graph)
    return out


__all__ = ["drop_unused_initializers", "keep_read_initializers", "unread_initializers"]
