"""Integer mode's layers on a published model, one at a time, against qonnx on the same inputs (fresh process).

Usage: ``python boundary_worker.py CORPUS_DIR NAME SEED[,SEED...]``; prints one JSON line prefixed ``BW `` per seed.

qonnx runs the whole model once on a seeded random input (its full execution context kept). Then each span of the
graph from one activation quantizer's input to the next activation quantizer's output (the quantizer, the layer,
what lies between them and the next quantizer) is cut out with ``onnx.utils.Extractor``, prepared with
``ortquant.prepare_model(..., integer=True)`` (the layer must be lowered) and run with
``ortquant.InferenceSession(..., integer=True)`` on qonnx's own value of the span's input. Both sides then quantize
the same input with the same quantizer and reduce the same codes, so by the integer-mode contract (docs/ops.md) the
outputs may differ only where qonnx's float32 pre-quantizer value lies at a rounding boundary of the next quantizer,
by one step. Reported per span: values compared, values differing, the largest difference in steps, and how many
differing values lie farther than ``TOL`` steps from a boundary (must be 0), and how many values of qonnx's lie
within ``TOL`` of one at all (a small share: the check can fail).
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

import ortquant

TOL = 2e-3  # distance from a boundary, in steps of the quantizer, that float32 rounding noise can bridge


def _activation_quants(m: onnx.ModelProto) -> list[onnx.NodeProto]:
    consts = {i.name for i in m.graph.initializer}
    return [
        n for n in m.graph.node if n.op_type == "Quant" and n.input[0] not in consts and n.input[0] != ""
    ]  # graph order is topological in the files used here


def _value(name: str, m: onnx.ModelProto, ctx: dict[str, np.ndarray]) -> np.ndarray:
    for i in m.graph.initializer:
        if i.name == name:
            return numpy_helper.to_array(i)
    return np.asarray(ctx[name])


def _qonnx_context(path: Path, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    make_model = helper.make_model
    helper.make_model = lambda g, **kw: make_model(g, **{"ir_version": 10, **kw})
    try:
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.core.onnx_exec import execute_onnx
        from qonnx.transformation.infer_shapes import InferShapes

        mw = ModelWrapper(str(path)).transform(InferShapes())
        return execute_onnx(mw, feeds, return_full_exec_context=True)
    finally:
        helper.make_model = make_model


def main(corpus: str, name: str, seed: int) -> dict[str, Any]:
    path = Path(corpus) / f"{name}.onnx"
    m = onnx.load(str(path))
    ref = np.load(Path(corpus) / f"{name}.npz")
    feeds = {k[3:]: ref[k] for k in ref.files if k.startswith("in:")}
    rng = np.random.default_rng(seed)
    feeds = {k: rng.uniform(-0.25, 1.25, v.shape).astype(v.dtype) for k, v in feeds.items()}
    spans: list[dict[str, Any]] = []
    quants = _activation_quants(m)
    with tempfile.TemporaryDirectory() as tmp:
        # ortquant's sessions first (nothing else registered in this process yet), qonnx after
        cut: list[tuple[onnx.NodeProto, onnx.NodeProto, str]] = []
        # the Extractor wants a value_info for every name it cuts at: float tensors of unknown shape
        known = {v.name for v in [*m.graph.value_info, *m.graph.input, *m.graph.output]}
        m.graph.value_info.extend(
            helper.make_tensor_value_info(o, onnx.TensorProto.FLOAT, None)
            for n in m.graph.node
            for o in n.output
            if o and o not in known
        )
        extractor = onnx.utils.Extractor(m)
        for a, b in itertools.pairwise(quants):
            sub = extractor.extract_model([a.input[0]], [b.output[0]])
            sub.ir_version = m.ir_version
            sub_path = Path(tmp) / f"span_{len(cut)}.onnx"
            onnx.save(sub, str(sub_path))
            prepared = ortquant.prepare_model(onnx.load(str(sub_path)), integer=True)
            floats = [n.name for n in prepared.graph.node if n.op_type in ("Conv", "MatMul", "Gemm", "ConvTranspose")]
            cut.append((a, b, str(sub_path)))
            spans.append({"span": f"{a.name} -> {b.name}", "float_layers": floats})
        sessions = [ortquant.InferenceSession(p, integer=True) for _, _, p in cut]
        ctx = _qonnx_context(path, feeds)
        for (a, b, _), sess, span in zip(cut, sessions, spans, strict=True):
            got = sess.run(None, {a.input[0]: np.asarray(ctx[a.input[0]])})[0].astype(np.float64)
            want = np.asarray(ctx[b.output[0]], np.float64)
            s = np.float64(_value(b.input[1], m, ctx))
            z = np.float64(_value(b.input[2], m, ctx))
            steps = np.abs(got - want) / s
            differ = steps > 0.5
            mode = next(
                (helper.get_attribute_value(x).decode() for x in b.attribute if x.name == "rounding_mode"), "ROUND"
            ).upper()
            u = np.asarray(ctx[b.input[0]], np.float32).astype(np.float64) / s + z
            frac = u - np.floor(u)
            # the boundaries: half-integers for the modes rounding to nearest, integers for FLOOR / CEIL / ...
            nearest = mode in ("ROUND", "HALF_EVEN", "HALF_UP", "HALF_DOWN", "ROUND_HALF_EVEN")
            dist = np.abs(frac - 0.5) if nearest else np.minimum(frac, 1 - frac)
            off_boundary = dist > TOL
            span.update(
                values=int(want.size),
                differing=int(differ.sum()),
                max_steps=float(steps.max()) if steps.size else 0.0,
                off_boundary=int((differ & off_boundary).sum()),
                near_boundary=int((~off_boundary).sum()),
                mode=mode,
            )
    return {"name": name, "seed": seed, "spans": spans}


if __name__ == "__main__":
    for seed in sys.argv[3].split(","):
        print("BW " + json.dumps(main(sys.argv[1], sys.argv[2], int(seed))), flush=True)
