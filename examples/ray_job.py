"""A Ray Data batch job with ortquant: one session per worker, results in order, checked against one local session.

    pip install '.[ray]'                                  # in the clone; or 'ray[data]' next to a wheel
    python examples/ray_job.py [MODEL.onnx] [ROWS]        # default: models/cnn_w4a4.onnx, 512 rows

Starts a local Ray cluster with 2 CPUs (on a real cluster: ray.init(address="auto") and a model path or s3:// URI
every node can read). A model with a fixed batch of 1, as QONNX exports usually are, works too: the Predictor makes
its batch dimension symbolic where the graph allows it, else runs rows one at a time, and logs which.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import ray

import ortquant
import ortquant.ray

model = sys.argv[1] if len(sys.argv) > 1 else str(Path(__file__).resolve().parents[1] / "models" / "cnn_w4a4.onnx")
rows = int(sys.argv[2]) if len(sys.argv) > 2 else 512

local = ortquant.InferenceSession(model)
inp = local.get_inputs()[0]
x = np.random.default_rng(0).standard_normal([rows, *inp.shape[1:]]).astype(np.float32)

ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
ds = ray.data.from_items([{"id": i, inp.name: x[i]} for i in range(rows)])
# Keep a CPU for the tasks that read the data: one worker with one CPU (intra-op threads = num_cpus).
out, figures = ortquant.ray.predict(ds, model, concurrency=1, num_cpus=1, batch_size=64)
result = out.sort("id").take_all()
ray.shutdown()

y = np.stack([r[local.get_outputs()[0].name] for r in result])
want = np.concatenate([local.run(None, {inp.name: x[i : i + 64]})[0] for i in range(0, rows, 64)])
print(f"{len(result)} rows, {figures['rows_per_s']:.0f} rows/s; max |difference| to one local session: "
      f"{np.abs(y - want).max():.3g}")  # fmt: skip
sys.exit(0 if np.array_equal(y, want) else 1)
