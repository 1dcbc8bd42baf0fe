"""End-to-end latency of the committed Brevitas models: ortquant in onnxruntime vs qonnx's execute_onnx.

Prints, per model and batch size, the median latency of both and the speedup (qonnx time / ortquant time),
measured in the same run. Needs qonnx (the test venv has it). ``--quick`` runs fewer iterations.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "models"))

from demo import median_ms, qonnx_runner  # noqa: E402

import ortquant  # noqa: E402
import ortquant.kernels  # noqa: E402

MODELS = ("cnn_w4a4", "fp8_mlp", "binary_mlp", "int8_resblock")


def time_model(model, reference, shape, threads: int, batch: int, runs: int, ref_runs: int) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Median latency in ms of ortquant and of qonnx on one random batch."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    sess = ortquant.InferenceSession(model, sess_options=so)
    iname = sess.get_inputs()[0].name
    x = np.random.default_rng(batch).standard_normal((batch, *shape)).astype(np.float32)
    ours = median_ms(lambda: sess.run(None, {iname: x}), warm=10, runs=runs)
    theirs = median_ms(lambda: reference(x), warm=1, runs=ref_runs)
    return ours, theirs


def main(argv: list[str]) -> int:
    """Time every model at batch 1 and 32 with 1 intra-op thread (and the default for comparison)."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--threads", default="1", help="comma-separated intra-op thread counts")
    args = p.parse_args(argv)
    runs, ref_runs = (10, 2) if args.quick else (200, 9)
    print(f"ortquant {ortquant.__version__}, onnxruntime {ort.__version__}, isa {ortquant.kernels.active_isa()}")
    print("| model | batch | threads | ortquant ms | qonnx ms | speedup |")
    print("|---|---|---|---|---|---|")
    for name in MODELS:
        model = onnx.load(str(ROOT / "models" / f"{name}.onnx"))
        reference = qonnx_runner(model)
        if reference is None:
            print("qonnx is not installed: pip install qonnx==1.0.0")
            return 1
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
        for threads in (int(t) for t in args.threads.split(",")):
            for batch in (1, 32):
                ours, theirs = time_model(model, reference, shape, threads, batch, runs, ref_runs)
                print(f"| {name} | {batch} | {threads} | {ours:.3f} | {theirs:.2f} | {theirs / ours:.0f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
