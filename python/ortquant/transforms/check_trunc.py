"""Check: QONNX Trunc nodes whose input count contradicts the domain's opset import (decision 6)."""

from __future__ import annotations

import onnx

from ortquant.transforms._read import node_label
from ortquant.transforms._util import QONNX_DOMAINS, ModelError, all_nodes, opset_version


def trunc_version_problems(model: onnx.ModelProto) -> list[str]:
    """One message per Trunc node whose input count contradicts its domain's opset import.

    qonnx picks Trunc v1 (5 inputs) for opset 1 or no import, v2 (6 inputs) for opset >= 2.
    """
    problems = []
    for node in all_nodes(model.graph):
        if node.op_type not in ("Trunc", "TruncQuant") or node.domain not in QONNX_DOMAINS:
            continue
        version = opset_version(model, node.domain) or 1
        n = len(node.input)
        want = 5 if version < 2 else 6
        if n != want:
            problems.append(
                f"{node_label(node)}: domain {node.domain} is imported at opset {version}, "
                f"which means Trunc v{1 if version < 2 else 2} with {want} inputs, but the node has {n}"
            )
    return problems


def check_trunc_versions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return ``model`` unchanged, or raise :class:`ModelError` listing every contradicting Trunc node."""
    problems = trunc_version_problems(model)
    if problems:
        raise ModelError("; ".join(problems))
    return model
