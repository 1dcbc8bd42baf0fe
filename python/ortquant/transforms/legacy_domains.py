"""Rewrite: QONNX ops in legacy or unlisted domains to ``qonnx.custom_op.general``, and missing opset imports.

What exporters wrote over the years, and what this transform does with it (docs/ops.md, "Domains"):

- ``finn`` (FINN 2019-2020): qonnx's ``ModelWrapper`` renames such nodes to ``qonnx.custom_op.general`` (or to
  ``finn.custom_op.fpgadataflow`` when the node has ``backend="fpgadataflow"``, FINN hardware ops ortquant does
  not run). We do the same rename for the QONNX general ops.
- ``qonnx`` (files qonnx itself wrote in older releases): the same rename as ``finn``.
- ``""`` (the default domain, older Brevitas/FINN flows with opset 9/11): a node whose op type is a QONNX general
  op is moved to ``qonnx.custom_op.general`` only when the name is not a standard ONNX op (true for every QONNX
  name today) or, should ONNX ever define the name, when the node's input count and attributes are QONNX's
  signature and not the standard op's. Standard ops are never touched.
- Domains the C library registers (qonnx.custom_op.general, finn.custom_op.general, onnx.brevitas, thinker,
  onnxinfer, ngraph) load in onnxruntime even when ``opset_import`` does not list them (tried with onnxruntime
  1.31), so such models are left alone; the import is added only for the domain moved nodes land in.

Moved nodes need an import of ``qonnx.custom_op.general``; when the model has none it is added at version 1, or 2
when a moved node is a 6-input Trunc (v2) from the default domain (qonnx never ran those, so the input count is
the only evidence). Nodes from ``finn`` keep qonnx's rule (its import, else version 1), which
``check_trunc_versions`` then enforces. Returns ``model`` itself when nothing changes.
"""

from __future__ import annotations

import onnx

from ortquant.transforms._util import all_nodes, copy_model

QONNX_GENERAL = "qonnx.custom_op.general"
# Domains whose QONNX general ops are renamed to QONNX_GENERAL (as qonnx's ModelWrapper renames ``finn``).
LEGACY_DOMAINS = ("finn", "qonnx")

# QONNX general op types: the input counts and the attributes that identify qonnx's signature.
QONNX_SIGNATURES: dict[str, tuple[tuple[int, ...], frozenset[str]]] = {
    "Quant": ((4,), frozenset({"signed", "narrow", "rounding_mode"})),
    "IntQuant": ((4,), frozenset({"signed", "narrow", "rounding_mode"})),
    "BipolarQuant": ((2,), frozenset()),
    "Trunc": ((5, 6), frozenset({"rounding_mode", "signed", "narrow"})),
    "TruncQuant": ((5, 6), frozenset({"rounding_mode", "signed", "narrow"})),
    "FloatQuant": ((6,), frozenset({"rounding_mode", "has_inf", "has_nan", "has_subnormal", "saturation"})),
    "MultiThreshold": ((2,), frozenset({"out_dtype", "out_scale", "out_bias", "data_layout"})),
    "XnorPopcountMatMul": ((2,), frozenset()),
    "Im2Col": ((1,), frozenset({"stride", "kernel_size", "input_shape", "pad_amount", "pad_value", "dilations"})),
    "MaxPoolNHWC": ((1,), frozenset({"kernel_shape", "pads", "strides", "ceil_mode"})),
    "QuantAvgPool2d": ((1,), frozenset({"stride", "kernel", "ibits", "obits", "signed", "data_layout"})),
    "DebugMarker": ((1,), frozenset({"export_debug_name"})),
    "GenericPartition": ((0, 1, 2, 3, 4, 5, 6, 7, 8), frozenset({"model"})),
}


def _is_standard(op_type: str) -> bool:
    return bool(onnx.defs.has(op_type, ""))


def _takes_default_domain_node(node: onnx.NodeProto) -> bool:
    """A default-domain node is QONNX's when its name is a QONNX op that ONNX does not define, or (for a name ONNX
    defines) when its input count and attribute names fit QONNX's signature and not the standard schema."""
    sig = QONNX_SIGNATURES.get(node.op_type)
    if sig is None:
        return False
    if not _is_standard(node.op_type):
        return True
    counts, qattrs = sig
    attrs = {a.name for a in node.attribute}
    schema = onnx.defs.get_schema(node.op_type, "")
    standard_attrs = set(schema.attributes)
    return len(node.input) in counts and bool(attrs & qattrs) and not attrs <= standard_attrs


def _node_target(node: onnx.NodeProto) -> str | None:
    """The domain this transform moves ``node`` to, or None."""
    if node.domain in ("", "ai.onnx") and _takes_default_domain_node(node):
        return QONNX_GENERAL
    if node.domain in LEGACY_DOMAINS and node.op_type in QONNX_SIGNATURES:
        backend = next((a for a in node.attribute if a.name == "backend"), None)
        if backend is None:
            return QONNX_GENERAL
    return None


def moved_nodes(model: onnx.ModelProto) -> list[tuple[onnx.NodeProto, str]]:
    """Every node this transform moves, with the domain it moves to (for ``ortquant check``)."""
    out = []
    for node in all_nodes(model.graph):
        target = _node_target(node)
        if target is not None:
            out.append((node, target))
    return out


def missing_imports(model: onnx.ModelProto) -> list[str]:
    """Domains that moved nodes land in but ``opset_import`` does not list."""
    imported = {imp.domain for imp in model.opset_import}
    used: list[str] = []
    for node in all_nodes(model.graph):
        domain = _node_target(node)
        if domain is not None and domain not in imported and domain not in used:
            used.append(domain)
    return used


def fix_legacy_domains(model: onnx.ModelProto) -> onnx.ModelProto:
    """Move legacy/default-domain QONNX nodes to ``qonnx.custom_op.general`` and add missing opset imports."""
    moves = moved_nodes(model)
    missing = missing_imports(model)
    if not moves and not missing:
        return model
    out = copy_model(model)
    v2_from_default = False
    for node in all_nodes(out.graph):
        target = _node_target(node)
        if target is None:
            continue
        if node.domain in ("", "ai.onnx") and node.op_type in ("Trunc", "TruncQuant") and len(node.input) == 6:
            v2_from_default = True
        node.domain = target
    imported = {imp.domain for imp in out.opset_import}
    for domain in missing:
        if domain in imported:
            continue
        version = 2 if domain == QONNX_GENERAL and v2_from_default else 1
        out.opset_import.append(onnx.helper.make_opsetid(domain, version))
        imported.add(domain)
    return out
