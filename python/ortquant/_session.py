"""The session helper and the model rewrites onnxruntime needs before it can load a model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import onnx

from ortquant._library import register
from ortquant.transforms import ModelError, PrepareOptions, _util, apply_pipeline
from ortquant.transforms.check_trunc import trunc_version_problems
from ortquant.transforms.int8_relu import rewrite_int8_relu

QONNX_DOMAINS = _util.QONNX_DOMAINS
LINGER_DOMAINS = _util.LINGER_DOMAINS

__all__ = ["InferenceSession", "ModelError", "check_trunc_versions", "prepare_model", "rewrite_int8_relu"]


def check_trunc_versions(model: onnx.ModelProto) -> list[str]:
    """Problems with QONNX Trunc nodes whose input count contradicts the domain's opset import (decision 6)."""
    return trunc_version_problems(model)


def _load(model: str | os.PathLike[str] | bytes | onnx.ModelProto) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, bytes):
        return onnx.load_from_string(model)
    return onnx.load(os.fspath(model))


def prepare_model(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto, *, exact: bool = False, integer: bool = False
) -> onnx.ModelProto:
    """Check a model and apply the rewrites onnxruntime needs; returns a ModelProto (a copy when changed).

    The steps and their order are ``ortquant.transforms.PIPELINE`` (docs/ops.md lists them). ``exact=True``
    keeps the model in the form that reproduces qonnx bit for bit; ``integer=True`` lowers quantized layers to the
    int8 engine. Raises :class:`ModelError` naming the node for a model ortquant cannot run.
    """
    proto, _changed = apply_pipeline(_load(model), PrepareOptions(exact=exact, integer=integer))
    return proto


def InferenceSession(  # noqa: N802 - mirrors onnxruntime.InferenceSession
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    sess_options: Any = None,
    providers: Sequence[Any] | None = None,
    *,
    exact: bool = False,
    integer: bool = False,
    **kwargs: Any,
) -> Any:
    """Create an ``onnxruntime.InferenceSession`` with ortquant's ops registered.

    ``model`` is a path, serialized bytes or a ModelProto. The model goes through :func:`prepare_model` first.
    ``sess_options`` is an ``onnxruntime.SessionOptions`` (a new one if None); ``providers`` defaults to CPU.
    ``exact`` and ``integer`` are passed to :func:`prepare_model`.
    """
    from ortquant._library import import_onnxruntime  # issue 12: a clear ImportError without onnxruntime

    ort = import_onnxruntime()

    proto = prepare_model(model, exact=exact, integer=integer)
    so = sess_options if sess_options is not None else ort.SessionOptions()
    register(so)
    return ort.InferenceSession(
        proto.SerializeToString(),
        sess_options=so,
        providers=list(providers) if providers is not None else ["CPUExecutionProvider"],
        **kwargs,
    )
