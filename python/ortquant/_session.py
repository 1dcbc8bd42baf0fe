"""The session helper and the model rewrites onnxruntime needs before it can load a model."""

from __future__ import annotations

import difflib
import os
import re
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import onnx
from google.protobuf.message import DecodeError

from ortquant._library import _is_registered, register
from ortquant.transforms import ModelError, PrepareOptions, _util, apply_pipeline
from ortquant.transforms.check_trunc import trunc_version_problems
from ortquant.transforms.int8_relu import rewrite_int8_relu

if TYPE_CHECKING:
    import onnxruntime

QONNX_DOMAINS = _util.QONNX_DOMAINS
LINGER_DOMAINS = _util.LINGER_DOMAINS

__all__ = [
    "InferenceSession",
    "ModelError",
    "check_trunc_versions",
    "exact_session_options",
    "load_model",
    "prepare_model",
    "rewrite_int8_relu",
    "unsupported_op_hint",
    "uses_external_data",
]


def check_trunc_versions(model: onnx.ModelProto) -> list[str]:
    """Problems with QONNX Trunc nodes whose input count contradicts the domain's opset import (decision 6)."""
    return trunc_version_problems(model)


def _describe(source: str | os.PathLike[str] | bytes) -> str:
    return "the model bytes" if isinstance(source, bytes) else os.fspath(source)


def _bad_string(message: Any) -> str | None:
    """The first string field of ``message`` or its sub-messages that is not UTF-8 (protobuf hands such a field
    over as bytes, or raises UnicodeDecodeError, and onnx fails on it later), as "field b'...'"; tensor data is not
    read."""
    for field, value in message.ListFields():
        if field.type == field.TYPE_MESSAGE:
            for item in [value] if hasattr(value, "ListFields") else value:  # one message, or a repeated field
                bad = _bad_string(item)
                if bad is not None:
                    return bad
        elif field.type == field.TYPE_STRING:
            for item in [value] if isinstance(value, (str, bytes)) else value:
                if isinstance(item, bytes):
                    return f"{field.name} {item[:60]!r}"
    return None


def _utf8_detail(e: UnicodeDecodeError) -> str:
    """What protobuf's UnicodeDecodeError says about the field, in the form _bad_string uses."""
    field = str(e).rsplit("in field: ", 1)[-1] if "in field: " in str(e) else "a string field"
    return f"{field.rsplit('.', 1)[-1]} {bytes(e.object[e.start : e.end])[:60]!r}"


def _check_parsed(model: onnx.ModelProto, name: str, size: int) -> onnx.ModelProto:
    if size == 0:
        raise ModelError(f"{name}: empty (0 bytes), not an ONNX model")
    if not model.HasField("graph"):
        raise ModelError(f"{name}: not an ONNX model (no graph in it: another protobuf message, or not an .onnx file)")
    try:
        bad = _bad_string(model)
    except UnicodeDecodeError as e:
        bad = e.reason
    if bad is not None:
        raise ModelError(f"{name}: a corrupt ONNX model (a string field is not UTF-8: {bad})")
    return model


def load_model(
    source: str | os.PathLike[str] | bytes | onnx.ModelProto, *, load_external_data: bool = True
) -> onnx.ModelProto:
    """``onnx.load`` with one-line errors: a file that is missing, unreadable, empty, cut off or not an ONNX model
    raises :class:`ModelError` naming the file and the cause (never protobuf's ``DecodeError``)."""
    if isinstance(source, onnx.ModelProto):
        return source
    name = _describe(source)
    if isinstance(source, bytes):
        try:
            return _check_parsed(onnx.load_from_string(source), name, len(source))
        except DecodeError as e:
            raise ModelError(f"{name}: not an ONNX model, or cut off ({e})") from e
        except UnicodeDecodeError as e:  # protobuf may check UTF-8 while parsing, depending on its backend
            raise ModelError(f"{name}: a corrupt ONNX model (a string field is not UTF-8: {_utf8_detail(e)})") from e
    try:
        size = os.path.getsize(name)
        model = onnx.load(name, load_external_data=False)
    except FileNotFoundError as e:
        raise ModelError(f"{name}: no such file") from e
    except IsADirectoryError as e:
        raise ModelError(f"{name}: a directory, not an .onnx file") from e
    except OSError as e:
        raise ModelError(f"{name}: cannot read it ({e.strerror or e})") from e
    except DecodeError as e:
        raise ModelError(f"{name}: not an ONNX model, or cut off ({size} bytes; protobuf: {e})") from e
    except UnicodeDecodeError as e:  # protobuf may check UTF-8 while parsing, depending on its backend
        raise ModelError(f"{name}: a corrupt ONNX model (a string field is not UTF-8: {_utf8_detail(e)})") from e
    _check_parsed(model, name, size)
    if load_external_data and uses_external_data(model):
        try:
            onnx.load_external_data_for_model(model, os.path.dirname(os.path.abspath(name)))
        except (OSError, ValueError, onnx.checker.ValidationError) as e:
            raise ModelError(f"{name}: cannot read its external data ({e})") from e
    return model


_load = load_model


def prepare_model(
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    *,
    exact: bool = False,
    integer: bool = False,
    overridable_initializers: bool = False,
) -> onnx.ModelProto:
    """Check a model and apply the rewrites onnxruntime needs; returns a ModelProto (a copy when changed).

    The steps and their order are ``ortquant.transforms.PIPELINE`` (docs/ops.md lists them). ``exact=True``
    keeps the model in the form that reproduces qonnx bit for bit; ``integer=True`` lowers quantized layers to the
    int8 engine. Initializers that the file also lists as graph inputs become constants (so weight quantizers are
    folded and weights pre-packed); ``overridable_initializers=True`` keeps them as inputs, for callers that feed
    weights at run time. Raises :class:`ModelError` naming the node for a model ortquant cannot run.
    """
    options = PrepareOptions(exact=exact, integer=integer, overridable_initializers=overridable_initializers)
    proto, changed = apply_pipeline(load_model(model), options)
    _warn_if_nothing_lowered(options, changed, model, proto)
    return proto


def _warn_if_nothing_lowered(
    options: PrepareOptions, changed: Sequence[str], source: object, prepared: onnx.ModelProto
) -> None:
    if not options.integer or "lower_integer" in changed:
        return
    if any(n.domain == "ortquant.integer" for n in prepared.graph.node):
        return  # lowered before (a model prepared with integer=True)
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "MODEL.onnx"
    warnings.warn(
        f"integer=True: no layer of {'the model' if name == 'MODEL.onnx' else name} was lowered to the integer "
        f"engine, so it runs in float as without integer=True; `ortquant check --integer {name}` says why for "
        "each Conv/MatMul/Gemm layer",
        RuntimeWarning,
        stacklevel=3,
    )


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


# The keywords onnxruntime.InferenceSession reads from its **kwargs (onnxruntime_inference_collection.py);
# anything else it silently ignores, which would hide a typo such as ``interger=True``.
_ORT_SESSION_KWARGS = frozenset({"enable_fallback", "read_config_from_model", "disabled_optimizers"})
_OUR_KWARGS = ("sess_options", "providers", "provider_options", "exact", "integer", *sorted(_ORT_SESSION_KWARGS))


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    unknown = [k for k in kwargs if k not in _ORT_SESSION_KWARGS]
    if not unknown:
        return
    key = unknown[0]
    close = difflib.get_close_matches(key, _OUR_KWARGS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise TypeError(
        f"InferenceSession() got an unexpected keyword argument {key!r}{hint}; it accepts {', '.join(_OUR_KWARGS)}"
    )


# Ops ortquant knows but deliberately does not run, with the reason.
NOT_SUPPORTED = {
    "GenericPartition": "GenericPartition is not supported: it executes another model file named by an attribute",
    "LayerNormInt": "LayerNormInt is not supported: linger 1.1.1 itself cannot run it (no reference semantics)",
}


def unsupported_op_hint(domain: str, op_type: str, opset: int | None = None) -> str:
    """What ortquant offers instead of ``domain::op_type``, which it has no kernel for (one sentence)."""
    from ortquant._library import supported_ops

    if op_type in NOT_SUPPORTED:
        return NOT_SUPPORTED[op_type]
    try:
        supported = supported_ops()
    except OSError as e:
        return f"ortquant's library cannot be loaded to list its ops ({e})"
    shown = domain or "ai.onnx"
    if (domain, op_type) in supported:
        at = f" at the opset version the model imports ({opset})" if opset is not None else ""
        return f"ortquant provides {shown}::{op_type}, but not{at}; docs/ops.md lists the versions"
    domains = sorted({d for d, _ in supported})
    elsewhere = sorted(d for d, o in supported if o == op_type)
    if elsewhere:
        return f"ortquant provides {op_type} in domain {', '.join(elsewhere)}, not in {shown}"
    if domain in domains:
        ops = sorted(o for d, o in supported if d == domain)
        return f"ortquant's domain {domain} has no op {op_type}; it has {', '.join(ops)}"
    return (
        f"neither onnxruntime nor ortquant provides the domain {shown!r}; ortquant's domains are "
        f"{', '.join(domains)} (ortquant.supported_ops() lists every op)"
    )


_UNREGISTERED = re.compile(r"([\w.\-]*):([\w.\-]+)\((-?\d+)\) is not a registered function/op")


def _node_label(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else "<unnamed>")


_NO_OP = re.compile(r'In Node, \("", ([\w.\-]+), "([^"]*)", -?\d+\) : \(.*?\) -> \("([^"]*)"')
_NO_KERNEL_DEF = re.compile(r"Node \(([^)]*)\) Op \(([\w.\-]+)\).*no kernel def matches node inputs")


def _input_types(node: onnx.NodeProto, model: onnx.ModelProto) -> str | None:
    """The element types of ``node``'s inputs as the model gives them (declared, initializers, onnx shape
    inference), "name type, ...", or None when none is known."""
    types = _util.element_types(model)
    short = {onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64"}
    known = [
        f"{name} {short.get(types[name], onnx.TensorProto.DataType.Name(types[name]).lower())}"
        for name in node.input
        if name and name in types and types[name] in onnx.TensorProto.DataType.values()
    ]
    return ", ".join(known) if known else None


def _explained(error: Exception, model: onnx.ModelProto) -> Exception:
    """onnxruntime's error, with the node and what ortquant supports when it names an op nobody registered, and with
    the unnamed node it means named by its first output."""
    message = str(error)
    m = _UNREGISTERED.search(message)
    if m is not None:
        domain, op_type = m.group(1), m.group(2)
        canon = {"ai.onnx": ""}
        nodes = [
            n
            for n in _util.all_nodes(model.graph)
            if canon.get(n.domain, n.domain) == canon.get(domain, domain) and n.op_type == op_type
        ]
        opset = _util.opset_version(model, domain)
        where = f" (node {', '.join(repr(_node_label(n)) for n in nodes[:5])})" if nodes else ""
        text = f"{message}{where}: {unsupported_op_hint(domain, op_type, opset)}"
    elif (m := _NO_KERNEL_DEF.search(message)) is not None:
        # a custom op's input element types that no kernel takes: say which types the node got
        nodes = [n for n in model.graph.node if _node_label(n) == m.group(1) and n.op_type == m.group(2)]
        kinds = _input_types(nodes[0], model) if nodes else None
        if kinds is None:
            return error
        text = (
            f"{message.rstrip()} (its inputs: {kinds}; docs/ops.md, '{m.group(2)}', lists the element-type "
            "combinations ortquant takes)"
        )
    else:
        m = _NO_OP.search(message)
        if m is None:
            return error
        text = f"{message} (the unnamed {m.group(2) or 'ai.onnx'}::{m.group(1)} node computing {m.group(3)!r})"
    try:
        return type(error)(text)
    except Exception:  # an exception type that takes other arguments: keep onnxruntime's own
        return error


_DISABLED_OPTIMIZERS_KEY = "optimization.disable_specified_optimizers"


def _empty_float_conv(model: onnx.ModelProto) -> bool:
    """Whether a standard Conv of the model has a constant weight with no element (onnxruntime's NCHWc transformer
    then fails at session creation: "invalid channel count"; its plain Conv runs it)."""
    empty = {t.name for t in model.graph.initializer if any(d == 0 for d in t.dims)}
    return any(n.op_type == "Conv" and n.domain in ("", "ai.onnx") and len(n.input) > 1 and n.input[1] in empty
               for n in model.graph.node)  # fmt: skip


def _integer_session_options(so: Any, model: onnx.ModelProto) -> None:
    """Integer mode's choice of onnxruntime optimizations, unless the caller chose a list already: none is turned
    off. The NCHWc transformer and the BatchNormalization / Mul / scale folds, which registering turns off for
    default mode's qonnx bits, may re-round the float layers integer mode leaves (a first convolution on the float
    image and its BatchNormalization) within integer mode's numeric contract (docs/ops.md, "Integer mode"). A float
    Conv with an empty weight keeps the NCHWc transformer off (onnxruntime's NCHWc form refuses it; the plain one
    runs it, as default mode does)."""
    if _is_registered(so):
        return  # registered before: the caller's options already say what they want
    try:
        so.get_session_config_entry(_DISABLED_OPTIMIZERS_KEY)
        return  # set by the caller
    except RuntimeError:  # onnxruntime raises for a key that was never set
        pass
    so.add_session_config_entry(_DISABLED_OPTIMIZERS_KEY, "NchwcTransformer" if _empty_float_conv(model) else "")


def InferenceSession(  # noqa: N802 - mirrors onnxruntime.InferenceSession
    model: str | os.PathLike[str] | bytes | onnx.ModelProto,
    sess_options: Any = None,
    providers: Sequence[Any] | None = None,
    provider_options: Sequence[dict[Any, Any]] | None = None,
    *,
    exact: bool = False,
    integer: bool = False,
    overridable_initializers: bool = False,
    **kwargs: Any,
) -> onnxruntime.InferenceSession:
    """Create an ``onnxruntime.InferenceSession`` with ortquant's ops registered.

    ``model`` is a path, serialized bytes or a ModelProto. The model goes through :func:`prepare_model` first.
    ``sess_options`` is an ``onnxruntime.SessionOptions`` (a new one if None); ``providers`` defaults to CPU.
    ``provider_options`` and the keywords onnxruntime's own ``InferenceSession`` reads (``enable_fallback``,
    ``read_config_from_model``, ``disabled_optimizers``) are passed on; any other keyword raises ``TypeError``.
    ``exact``, ``integer`` and ``overridable_initializers`` are passed to :func:`prepare_model`; ``exact=True``
    reproduces qonnx's op-by-op float results bit for bit (docs/ops.md, "exact=True"; it sets the optimization
    level of ``sess_options``). Registering the library disables onnxruntime's ``NchwcTransformer``,
    ``ConvBNFusion``, ``ConvMulFusion``, ``MatMul_BatchNormalization_Fusion`` and ``MatMulScaleFusion`` on the options
    (they re-round the float layer in front of a quantizer, which can move it by a step or flip a BipolarQuant's sign;
    docs/ops.md, "Default mode"); with ``integer=True`` none (a float layer integer mode leaves, such as
    a first convolution on the float image, may then run on onnxruntime's NCHWc kernels with its BatchNormalization
    folded, within integer mode's contract). It also sets ``session.disable_quant_qdq`` (onnxruntime's QDQ fusions
    run QuantizeLinear / DequantizeLinear layers in other arithmetic than the graph's; docs/ops.md, "Default mode").
    Options that carry those config keys already, or were registered before, are left as they are.

    A path is opened without its external data (``load_external_data=False``): when no transform changes the
    model, onnxruntime gets the path itself (no protobuf round trip, models over 2 GB work); otherwise it gets the
    rewritten graph and reads the external data from the model's folder. A file that is missing, empty, cut off or
    not an ONNX model raises :class:`ModelError` naming it.
    """
    _check_kwargs(kwargs)
    from ortquant._library import import_onnxruntime  # a clear ImportError without onnxruntime

    ort = import_onnxruntime()

    options = PrepareOptions(exact=exact, integer=integer, overridable_initializers=overridable_initializers)
    proto = load_model(model, load_external_data=False) if isinstance(model, (str, os.PathLike)) else load_model(model)
    prepared, changed = apply_pipeline(proto, options)
    _warn_if_nothing_lowered(options, changed, model, prepared)

    so = sess_options if sess_options is not None else ort.SessionOptions()
    if exact:
        exact_session_options(so)
        if so.intra_op_num_threads != 0:
            warnings.warn(
                f"exact=True with intra_op_num_threads={so.intra_op_num_threads}: qonnx runs onnxruntime with its "
                "default thread count (one per physical core), and some float kernels split their sums by thread "
                "count, so results can differ from qonnx's by float32 ulps; leave intra_op_num_threads unset (0) "
                'for qonnx\'s bits (docs/ops.md, "exact=True")',
                RuntimeWarning,
                stacklevel=2,
            )
    if integer and not exact:
        _integer_session_options(so, prepared)
    register(so)
    providers = list(providers) if providers is not None else ["CPUExecutionProvider"]
    if provider_options is not None:
        kwargs["provider_options"] = provider_options
    source: str | bytes
    if isinstance(model, (str, os.PathLike)) and prepared is proto:
        source = os.fspath(model)
    else:
        if isinstance(model, (str, os.PathLike)) and uses_external_data(prepared):
            folder = os.path.dirname(os.path.abspath(os.fspath(model)))
            so.add_session_config_entry(_EXTERNAL_FOLDER_KEY, folder)
        source = prepared.SerializeToString()
    try:
        return ort.InferenceSession(source, sess_options=so, providers=providers, **kwargs)
    except Exception as e:
        explained = _explained(e, prepared)
        if explained is e:
            raise
        raise explained from e
