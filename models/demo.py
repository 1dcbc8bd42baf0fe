"""ortquant demo: a Brevitas 4-bit CNN (QONNX) in stock onnxruntime, checked against qonnx and timed.

Run ``make demo`` (builds first), or after ``make build``: ``PYTHONPATH=python .venv/bin/python models/demo.py``;
with ortquant installed from a wheel: ``python models/demo.py``. Another model: ``models/demo.py other.onnx``
(single float input with a batch dimension). qonnx is optional: without it the results are compared with the
qonnx outputs stored next to the model (``models/cnn_w4a4.npz``) and only ortquant is timed.
Exit status 1 if ortquant and qonnx disagree, 2 if the model cannot be loaded.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

import ortquant

DEFAULT_MODEL = Path(__file__).resolve().parent / "cnn_w4a4.onnx"
BATCHES = (1, 32)
MAX_REL_DIFF = 1e-6  # the same bound as tests/models


def median_ms(fn: Callable[[], object], warm: int, runs: int) -> float:
    """Median wall time of fn() in milliseconds, after some warm-up calls."""
    for _ in range(warm):
        fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def qonnx_runner(model: onnx.ModelProto) -> Callable[[np.ndarray], np.ndarray] | None:
    """A function running qonnx's reference executor on the model, or None if qonnx is not installed."""
    try:
        import onnx.helper
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.core.onnx_exec import execute_onnx
        from qonnx.transformation.change_batchsize import ChangeBatchSize
        from qonnx.transformation.infer_shapes import InferShapes
    except ImportError:
        return None

    # qonnx builds a one-node model per standard node; onnx 1.23 would write IR 14, onnxruntime 1.31 reads <= 13.
    make_model = onnx.helper.make_model

    def make_model_ir10(graph: onnx.GraphProto, **kwargs: object) -> onnx.ModelProto:
        kwargs.setdefault("ir_version", 10)
        return make_model(graph, **kwargs)

    onnx.helper.make_model = make_model_ir10
    fixed: dict[int, ModelWrapper] = {}  # qonnx needs every shape known: one copy per batch size

    def run(x: np.ndarray) -> np.ndarray:
        b = int(x.shape[0])
        if b not in fixed:
            fixed[b] = ModelWrapper(model).transform(ChangeBatchSize(b)).transform(InferShapes())
        w = fixed[b]
        return np.asarray(execute_onnx(w, {w.graph.input[0].name: x})[w.graph.output[0].name])

    return run


def compare(label: str, got: np.ndarray, want: np.ndarray, bitexact: bool = False) -> bool:
    """Print the maximum difference and whether it is within the bound (0 when ``bitexact``); True when it is."""
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    rel = diff / max(float(np.max(np.abs(want))), 1e-30)
    ok = got.shape == want.shape and (diff == 0.0 if bitexact else rel <= MAX_REL_DIFF)
    print(f"  {label}: max abs diff {diff:.3g} -> {'agree' if ok else 'DISAGREE'}")
    return ok


def main(argv: list[str]) -> int:
    """Run the demo on argv[0] (default models/cnn_w4a4.onnx); return the exit status."""
    path = Path(argv[0]) if argv else DEFAULT_MODEL
    model = onnx.load(str(path))
    ops = sorted({n.op_type for n in model.graph.node if n.domain})
    print(f"ortquant {ortquant.__version__}, onnxruntime {ort.__version__}")
    print(f"model: {path.name}, {len(model.graph.node)} nodes, custom ops {', '.join(ops)}")

    try:
        sess = ortquant.InferenceSession(model)  # default: weight quantizers folded, onnxruntime's optimizations
        exact_sess = ortquant.InferenceSession(model, exact=True)  # qonnx's numbers bit for bit
    except Exception as e:
        print(f"ortquant cannot load {path.name}: {e}")
        return 2
    name = sess.get_inputs()[0].name
    sample_shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]

    def ortquant_run(x: np.ndarray) -> np.ndarray:
        return sess.run(None, {name: x})[0]

    def exact_run(x: np.ndarray) -> np.ndarray:
        return exact_sess.run(None, {name: x})[0]

    reference = qonnx_runner(model)
    rng = np.random.default_rng(0)
    inputs = {b: rng.standard_normal((b, *sample_shape)).astype(np.float32) for b in BATCHES}

    ok = True
    if reference is not None:
        print("ortquant vs qonnx execute_onnx (default: within float32 reordering; exact=True: bit for bit):")
        for b, x in inputs.items():
            want = reference(x)
            ok &= compare(f"batch {b:2d} default   ", ortquant_run(x), want)
            ok &= compare(f"batch {b:2d} exact=True", exact_run(x), want, bitexact=True)
    else:
        stored_path = path.with_suffix(".npz")
        if not stored_path.is_file():
            print(f"qonnx not installed and no stored outputs ({stored_path.name}): nothing to compare with")
            return 1
        print(f"qonnx not installed: comparing with the stored qonnx outputs ({stored_path.name})")
        with np.load(stored_path) as stored:
            for b in (1, 4):
                x, want = stored[f"input_b{b}"], stored[f"output_b{b}"]
                ok &= compare(f"batch {b:2d} default   ", ortquant_run(x), want)
                ok &= compare(f"batch {b:2d} exact=True", exact_run(x), want, bitexact=True)

    print("time per inference (median):")
    for b, x in inputs.items():
        t_ours = median_ms(lambda x=x: ortquant_run(x), warm=5, runs=50)
        if reference is None:
            print(f"  batch {b:2d}: ortquant {t_ours:8.3f} ms")
            continue
        t_ref = median_ms(lambda x=x: reference(x), warm=1, runs=7)
        print(f"  batch {b:2d}: ortquant {t_ours:8.3f} ms   qonnx {t_ref:8.2f} ms   speedup {t_ref / t_ours:6.0f}x")

    print("result: agree" if ok else "result: DISAGREE")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
