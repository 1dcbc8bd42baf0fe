"""The session helper and the model rewrites onnxruntime needs before it can load a model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import onnx

from ortquant._library import register

QONNX_DOMAINS = ("qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas")


class ModelError(ValueError):
    """A model that ortquant cannot run as written (the message names the node and the problem)."""


def _opset_version(model: onnx.ModelProto, domain: str) -> int | None:
    for imp in model.opset_import:
        if imp.domain == domain:
            return int(imp.version)
    return None


def check_trunc_versions(model: onnx.ModelProto) -> list[str]:
    """Problems with QONNX Trunc nodes whose input count contradicts the domain's opset import.

    qonnx picks Trunc v1 (5 inputs) for opset 1 or no import, v2 (6 inputs) for opset >= 2 (decision 6).
    """
    problems = []
    for node in _all_nodes(model.graph):
        if node.op_type not in ("Trunc", "TruncQuant") or node.domain not in QONNX_DOMAINS:
            continue
        version = _opset_version(model, node.domain) or 1
        n = len(node.input)
        want = 5 if version < 2 else 6
        if n != want:
            problems.append(
                f"Trunc node '{node.name}': domain {node.domain} is imported at opset {version}, "
                f"which means Trunc v{1 if version < 2 else 2} with {want} inputs, but the node has {n}"
            )
    return problems


def _all_nodes(graph: onnx.GraphProto):
    for node in graph.node:
        yield node
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                yield from _all_nodes(attr.g)
            elif attr.type == onnx.AttributeProto.GRAPHS:
                for g in attr.graphs:
                    yield from _all_nodes(g)


def _load(model: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    return onnx.load(os.fspath(model))


def prepare_model(model: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    """Check a model and rewrite what onnxruntime needs; returns a ModelProto (a copy when changed).

    Checks: QONNX Trunc input counts against the opset import (decision 6). Raises :class:`ModelError`.
    """
    proto = _load(model)
    problems = check_trunc_versions(proto)
    if problems:
        raise ModelError("; ".join(problems))
    return proto


def InferenceSession(  # noqa: N802 - mirrors onnxruntime.InferenceSession
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    sess_options: Any = None,
    providers: Sequence[Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Create an ``onnxruntime.InferenceSession`` with ortquant's ops registered.

    ``model`` is a path, serialized bytes or a ModelProto. The model goes through :func:`prepare_model` first.
    ``sess_options`` is an ``onnxruntime.SessionOptions`` (a new one if None); ``providers`` defaults to CPU.
    """
    import onnxruntime as ort

    proto = prepare_model(model)
    so = sess_options if sess_options is not None else ort.SessionOptions()
    register(so)
    return ort.InferenceSession(
        proto.SerializeToString(),
        sess_options=so,
        providers=list(providers) if providers is not None else ["CPUExecutionProvider"],
        **kwargs,
    )
