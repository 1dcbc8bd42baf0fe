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

__all__ = [
    "InferenceSession",
    "ModelError",
    "check_trunc_versions",
    "exact_session_options",
    "prepare_model",
    "rewrite_int8_relu",
    "uses_external_data",
]


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


def uses_external_data(model: onnx.ModelProto) -> bool:
    """Whether any initializer of ``model`` (top-level graph) keeps its data in an external file."""
    return any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer)


# onnxruntime's session config key for the folder of external initializers of a model given as bytes.
_EXTERNAL_FOLDER_KEY = "session.model_external_initializers_file_folder_path"


def exact_session_options(so: Any) -> Any:
    """Set ``so`` up for ``exact=True`` and return it: no graph optimizations and no weight prepacking.

    qonnx's ``execute_onnx`` runs each standard node in its own onnxruntime session whose inputs (weights included)
    are all runtime inputs, so nothing is fused across nodes and no optimization that needs constant weights (the
    NCHWc convolution, Conv+BatchNormalization folding) ever applies. ``ORT_DISABLE_ALL`` computes exactly that
    (docs/ops.md, "exact=True", has the measurements); prepacking is disabled too because qonnx never prepacks.
    """
    import onnxruntime as ort

    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.add_session_config_entry("session.disable_prepacking", "1")
    return so


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
    ``exact`` and ``integer`` are passed to :func:`prepare_model`; ``exact=True`` reproduces qonnx's op-by-op
    float results bit for bit (docs/ops.md, "exact=True"; it sets the optimization level of ``sess_options``).

    A path is opened without its external data (``load_external_data=False``): when no transform changes the
    model, onnxruntime gets the path itself (no protobuf round trip, models over 2 GB work); otherwise it gets the
    rewritten graph and reads the external data from the model's folder.
    """
    from ortquant._library import import_onnxruntime  # issue 12: a clear ImportError without onnxruntime

    ort = import_onnxruntime()

    so = sess_options if sess_options is not None else ort.SessionOptions()
    if exact:
        exact_session_options(so)
    register(so)
    providers = list(providers) if providers is not None else ["CPUExecutionProvider"]
    options = PrepareOptions(exact=exact, integer=integer)
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        proto = onnx.load(path, load_external_data=False)
        prepared, _changed = apply_pipeline(proto, options)
        if prepared is proto:
            return ort.InferenceSession(path, sess_options=so, providers=providers, **kwargs)
        if uses_external_data(prepared):
            folder = os.path.dirname(os.path.abspath(path))
            so.add_session_config_entry(_EXTERNAL_FOLDER_KEY, folder)
        return ort.InferenceSession(prepared.SerializeToString(), sess_options=so, providers=providers, **kwargs)
    proto = prepare_model(model, exact=exact, integer=integer)
    return ort.InferenceSession(proto.SerializeToString(), sess_options=so, providers=providers, **kwargs)
