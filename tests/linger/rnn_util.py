"""Helpers of the LSTMInt/GRUInt tests: conformance cases, a tiny reference interpreter, random node models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ortquant.reference import linger_rnn as ref

DATA = Path(__file__).resolve().parent.parent / "data" / "linger"
LSTM_CASES = sorted(p.stem for p in DATA.glob("lstm_*.onnx"))
GRU_CASES = sorted(p.stem for p in DATA.glob("gru_*.onnx"))
RNN_OPS = {
    "LSTMInt",
    "LSTMInt_Is8_Is64",
    "LSTMInt_Is8_Is64_If32_If32",
    "GRUInt",
    "GRUInt_Is8_Is64",
    "GRUInt_Is8_Is64_If32",
}


def load_case(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]:
    """The model, its feeds (by graph-input name) and linger's expected outputs (graph-output order)."""
    model = onnx.load(str(DATA / f"{name}.onnx"))
    data = np.load(DATA / f"{name}.npz")
    feeds = {inp.name: data[f"x{i}"] for i, inp in enumerate(model.graph.input)}
    expected = [data[f"y{i}"] for i in range(len(model.graph.output))]
    return model, feeds, expected


def attrs_of(node: onnx.NodeProto) -> dict[str, Any]:
    """Node attributes as Python values."""
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def rnn_scales(attrs: dict[str, Any]) -> ref.RnnScales:
    """The RnnScales of an LSTMInt/GRUInt node's attributes."""
    return ref.RnnScales(
        scale_i=float(attrs["scale_i"]),
        scale_h=float(attrs["scale_h"]),
        scale_iw=float(attrs["scale_iw"]),
        scale_hw=float(attrs["scale_hw"]),
        scale_o=float(attrs["scale_o"]) if "o_bits" in attrs else None,
        o_bits=int(attrs["o_bits"]) if "o_bits" in attrs else None,
        data_bits=int(attrs.get("data_bits", 8)),
    )


def split_rnn_inputs(values: list[np.ndarray | None], lstm: bool) -> dict[str, np.ndarray | None]:
    """Assign an LSTMInt/GRUInt input list to roles by position and dtype (the forms of decision 16)."""
    roles: dict[str, np.ndarray | None] = {"x": values[0]}
    i = 1
    if i < len(values) and values[i] is not None and values[i].dtype.kind in "iu" and values[i].dtype != np.int8:
        roles["lengths"] = values[i]
        i += 1
    if i < len(values) and values[i] is not None and values[i].dtype == np.float32:
        roles["h0"] = values[i]
        i += 1
        if lstm:
            roles["c0"] = values[i]
            i += 1
    roles["w_ih"], roles["w_hh"] = values[i], values[i + 1]
    rest = values[i + 2 :]
    roles["b_ih"] = rest[0] if rest else None
    roles["b_hh"] = rest[1] if rest else None
    return roles


def reference_rnn(op_type: str, attrs: dict[str, Any], values: list[np.ndarray | None]) -> list[np.ndarray]:
    """Run one LSTMInt/GRUInt node with the numpy reference."""
    lstm = op_type.startswith("LSTM")
    r = split_rnn_inputs(values, lstm)
    kw: dict[str, Any] = {
        "lengths": r.get("lengths"),
        "h0": r.get("h0"),
        "batch_first": bool(attrs.get("batch_first", 0)),
        "go_forward": bool(attrs.get("go_forward", 1)),
    }
    if lstm:
        kw["c0"] = r.get("c0")
        return list(ref.lstm_int(r["x"], r["w_ih"], r["w_hh"], r["b_ih"], r["b_hh"], rnn_scales(attrs), **kw))
    return list(ref.gru_int(r["x"], r["w_ih"], r["w_hh"], r["b_ih"], r["b_hh"], rnn_scales(attrs), **kw))


def _luna(q: np.ndarray, ratio: float, bits: int = 8) -> np.ndarray:
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return np.clip(np.floor(q.astype(np.float64) * ratio + 0.5), lo, hi).astype(np.int8)


def reference_graph(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Interpret a linger recurrent conformance graph (Quant, LSTM/GRU, iqCat, Concat, Dequant, Constant)."""
    env: dict[str, np.ndarray] = dict(feeds)
    for init in model.graph.initializer:
        env[init.name] = numpy_helper.to_array(init)
    for node in model.graph.node:
        a = attrs_of(node)
        ins = [env[n] if n else None for n in node.input]
        if node.op_type == "Constant":
            outs = [numpy_helper.to_array(a["value"])]
        elif node.op_type == "Quant":
            x = ins[0].astype(np.float32) * np.float32(a["scale_x"])
            bits = int(a["data_bits"])
            outs = [np.clip(np.floor(x + np.float32(0.5)), -(1 << (bits - 1)), (1 << (bits - 1)) - 1).astype(np.int8)]
        elif node.op_type in RNN_OPS:
            outs = reference_rnn(node.op_type, a, ins)
        elif node.op_type == "iqCat":
            so = float(a["scale_o"])
            parts = [_luna(q, so / float(a[f"scale_x_{k}"])) for k, q in enumerate(ins)]
            outs = [np.concatenate(parts, axis=int(a["dim"]))]
        elif node.op_type == "Concat":
            outs = [np.concatenate(ins, axis=int(a["axis"]))]
        elif node.op_type == "Dequant":
            x = ins[0]
            outs = [x if x.dtype == np.float32 else (x.astype(np.float32) / np.float32(a["scale_o"]))]
        else:
            raise NotImplementedError(node.op_type)
        for name, v in zip(node.output, outs, strict=True):
            env[name] = v
    return [env[o.name] for o in model.graph.output]
