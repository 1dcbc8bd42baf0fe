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
        outs = _eval_node(node, [env[n] if n else None for n in node.input])
        for name, v in zip(node.output, outs, strict=True):
            env[name] = v
    return [env[o.name] for o in model.graph.output]


# ---- random cases --------------------------------------------------------------------------------------------

POW2_SCALES = {"scale_i": 64.0, "scale_h": 128.0, "scale_iw": 128.0, "scale_hw": 64.0}


def random_case(
    rng: np.random.Generator,
    *,
    lstm: bool,
    t_len: int,
    batch: int,
    d: int,
    h: int,
    batch_first: bool = False,
    lengths: list[int] | None = None,
    state: bool = False,
    bias: bool = True,
    o_bits: int | None = 8,
    scale_o: float = 128.0,
    scales: dict[str, float] | None = None,
    bias_range: int = 20000,
) -> dict[str, Any]:
    """Random int8 data/weights and int32 biases for one LSTMInt/GRUInt node; keys as split_rnn_inputs gives."""
    g = (4 if lstm else 3) * h
    c: dict[str, Any] = {
        "x": rng.integers(-128, 128, (batch, t_len, d) if batch_first else (t_len, batch, d)).astype(np.int8),
        "w_ih": rng.integers(-128, 128, (g, d)).astype(np.int8),
        "w_hh": rng.integers(-128, 128, (g, h)).astype(np.int8),
        "b_ih": rng.integers(-bias_range, bias_range, g).astype(np.int32) if bias else None,
        "b_hh": rng.integers(-bias_range, bias_range, g).astype(np.int32) if bias else None,
        "lengths": None if lengths is None else np.asarray(lengths, np.int64),
        "h0": rng.standard_normal((1, batch, h)).astype(np.float32) if state else None,
        "c0": (rng.standard_normal((1, batch, h)) * 4).astype(np.float32) if (state and lstm) else None,
    }
    attrs: dict[str, Any] = {
        "hidden_size": h,
        "input_size": d,
        "num_layers": 1,
        "batch_first": int(batch_first),
        "dropout": 0.0,
        "go_forward": 1,
        "data_bits": 8,
        "parameter_bits": 8,
        "platform_quant": "luna_quant",
    }
    attrs.update(scales or POW2_SCALES)
    if o_bits is not None:
        attrs["o_bits"] = o_bits
        attrs["scale_o"] = scale_o
    c["attrs"] = attrs
    c["lstm"] = lstm
    return c


def case_inputs(c: dict[str, Any]) -> list[np.ndarray]:
    """The node's input list in the form the case asks for: x, (lengths), (h0, (c0)), W_ih, W_hh, (B_ih, B_hh)."""
    ins = [c["x"]]
    if c["lengths"] is not None:
        ins.append(c["lengths"])
    if c["h0"] is not None:
        ins.append(c["h0"])
        if c["lstm"]:
            ins.append(c["c0"])
    ins += [c["w_ih"], c["w_hh"]]
    if c["b_ih"] is not None:
        ins += [c["b_ih"], c["b_hh"]]
    return ins


def case_reference(c: dict[str, Any], go_forward: bool = True) -> list[np.ndarray]:
    """Reference outputs of a random case (go_forward overrides the attribute)."""
    attrs = dict(c["attrs"], go_forward=int(go_forward))
    return reference_rnn("LSTMInt" if c["lstm"] else "GRUInt", attrs, case_inputs(c))


def case_model(
    c: dict[str, Any], op_type: str, domain: str = "thinker", const_weights: bool = True, go_forward: bool = True
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A one-node model of the case (weights/biases initializers when const_weights, everything else inputs)."""
    from conftest import make_node_model

    ins = case_inputs(c)
    const = [const_weights and a.dtype in (np.int8, np.int32) and k > 0 for k, a in enumerate(ins)]
    attrs = dict(c["attrs"], go_forward=int(go_forward))
    out0 = onnx.TensorProto.INT8 if "o_bits" in attrs else onnx.TensorProto.FLOAT
    n_out = 3 if c["lstm"] else 2
    return make_node_model(
        op_type,
        domain,
        ins,
        const=const,
        attrs=attrs,
        n_outputs=n_out,
        output_dtypes=[out0] + [onnx.TensorProto.FLOAT] * (n_out - 1),
    )


def rnn_nodes_of_case(name: str) -> list[tuple[onnx.ModelProto, dict[str, np.ndarray], list[np.ndarray]]]:
    """Each LSTM/GRU node of a conformance case as a one-node model fed the values its inputs have in the case.

    The node keeps its op_type, domain, attributes and initializers; the expected outputs are the reference's
    (which test_reference_matches_linger checks against linger's own outputs of the whole graph).
    """
    from conftest import IR_VERSION

    model, feeds, _ = load_case(name)
    env: dict[str, np.ndarray] = dict(feeds)
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    env.update(inits)
    constants = {o for node in model.graph.node if node.op_type == "Constant" for o in node.output}
    result = []
    for node in model.graph.node:
        ins = [env[n] if n else None for n in node.input]
        outs = _eval_node(node, ins)
        if node.op_type in RNN_OPS:
            graph_inputs, node_inits, node_feeds = [], [], {}
            for n, v in zip(node.input, ins, strict=True):
                if n in inits or n in constants:
                    node_inits.append(numpy_helper.from_array(v, n))
                else:
                    graph_inputs.append(
                        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                    )
                    node_feeds[n] = v
            graph_outputs = [
                helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                for o, v in zip(node.output, outs, strict=True)
            ]
            g = helper.make_graph([node], "g", graph_inputs, graph_outputs, initializer=node_inits)
            m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(node.domain, 1)])
            m.ir_version = IR_VERSION
            result.append((m, node_feeds, outs))
        for n, v in zip(node.output, outs, strict=True):
            env[n] = v
    return result


def _eval_node(node: onnx.NodeProto, ins: list[np.ndarray | None]) -> list[np.ndarray]:
    a = attrs_of(node)
    if node.op_type == "Constant":
        return [numpy_helper.to_array(a["value"])]
    if node.op_type == "Quant":
        x = ins[0].astype(np.float32) * np.float32(a["scale_x"])
        bits = int(a["data_bits"])
        return [np.clip(np.floor(x + np.float32(0.5)), -(1 << (bits - 1)), (1 << (bits - 1)) - 1).astype(np.int8)]
    if node.op_type in RNN_OPS:
        return reference_rnn(node.op_type, a, ins)
    if node.op_type == "iqCat":
        so = float(a["scale_o"])
        return [
            np.concatenate([_luna(q, so / float(a[f"scale_x_{k}"])) for k, q in enumerate(ins)], axis=int(a["dim"]))
        ]
    if node.op_type == "Concat":
        return [np.concatenate(ins, axis=int(a["axis"]))]
    if node.op_type == "Dequant":
        x = ins[0]
        return [x if x.dtype == np.float32 else (x.astype(np.float32) / np.float32(a["scale_o"]))]
    raise NotImplementedError(node.op_type)
