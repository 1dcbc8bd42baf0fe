"""Run a quantized QONNX model (Brevitas export) with ortquant from Python.

    python examples/python_session.py [MODEL.onnx]        # default: models/cnn_w4a4.onnx of this repository

Three ways to the same outputs: ``ortquant.InferenceSession`` (prepares the model and registers the op library),
integer mode (quantized layers on the int8 engine), and a plain ``onnxruntime.InferenceSession`` with the library
registered on your own ``SessionOptions`` (enough for models that need no rewrite, like this one).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort

import ortquant

model = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1] / "models" / "cnn_w4a4.onnx")

sess = ortquant.InferenceSession(model)
inp = sess.get_inputs()[0]
shape = [4 if not isinstance(d, int) else d for d in inp.shape]  # a symbolic batch dimension: 4 rows
x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
(y,) = sess.run(None, {inp.name: x})
print(f"ortquant {ortquant.__version__}, onnxruntime {ort.__version__}, kernels: {ortquant.kernels.active_isa()}")
print(f"{Path(model).name}: {inp.name} {list(x.shape)} -> {list(y.shape)}, classes {y.argmax(axis=-1).tolist()}")

# Integer mode: exact integer sums, one float64 rescale per layer (docs/ops.md, "Integer mode").
(y_int,) = ortquant.InferenceSession(model, integer=True).run(None, {inp.name: x})
print(f"integer mode: classes {y_int.argmax(axis=-1).tolist()}, max |difference| {np.abs(y_int - y).max():.3g}")

# Your own SessionOptions: register the library, then onnxruntime's own InferenceSession.
so = ort.SessionOptions()
so.intra_op_num_threads = 1
ortquant.register(so)
(y_plain,) = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, {inp.name: x})
print(f"plain onnxruntime session: max |difference| {np.abs(y_plain - y).max():.3g}")
