"""One session used from many Python threads at once (InferenceSession.run is thread-safe, so kernels must be
immutable after creation), and sessions created concurrently (registration from several threads).

Outputs must be bit-identical to the single-threaded results. Sizes are small enough to stay well under 20 s on
two cores, yet the large input is above the elementwise grain so the intra-op pool splits it too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import IR_VERSION, assert_bitexact
from ortquant.reference import qonnx as ref

QONNX = "qonnx.custom_op.general"
N_THREADS = 8
RUNS_PER_THREAD = 200
SHAPE = (
    2,
    16,
    64,
    72,
)  # 147456 elements, above the kernels' 65536-element grain: split across the pool
CH = SHAPE[1]
W_SCALE = np.linspace(0.01, 0.2, CH, dtype=np.float32).reshape(CH, 1)


def _model() -> onnx.ModelProto:
    """Three Quant flavours in one graph.

    y1: per-channel constant parameters, 8-bit signed ROUND (the usual activation quantizer).
    y2: runtime scale input (per-channel), 4-bit unsigned narrow FLOOR with a zero point.
    y3: all-constant inputs (a weight quantizer, computed once at session creation; decision 18).
    """
    w = np.linspace(-1, 1, CH * 9, dtype=np.float32).reshape(CH, 9)
    inits = [
        numpy_helper.from_array(np.linspace(0.02, 0.5, CH, dtype=np.float32).reshape(1, CH, 1, 1), "s1"),
        numpy_helper.from_array(np.float32(0), "z0"),
        numpy_helper.from_array(np.float32(8), "b8"),
        numpy_helper.from_array(np.float32(2), "z2"),
        numpy_helper.from_array(np.int32(4), "b4"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(W_SCALE, "ws"),
    ]
    nodes = [
        helper.make_node(
            "Quant",
            ["x", "s1", "z0", "b8"],
            ["y1"],
            domain=QONNX,
            name="q_act",
            signed=1,
            narrow=0,
        ),
        helper.make_node(
            "Quant",
            ["x", "s2", "z2", "b4"],
            ["y2"],
            domain=QONNX,
            name="q_runtime",
            signed=0,
            narrow=1,
            rounding_mode="FLOOR",
        ),
        helper.make_node(
            "Quant",
            ["w", "ws", "z0", "b8"],
            ["y3"],
            domain=QONNX,
            name="q_weight",
            signed=1,
            narrow=1,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "concurrency",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, list(SHAPE)),
            helper.make_tensor_value_info("s2", TensorProto.FLOAT, [1, CH, 1, 1]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y1", "y2", "y3")],
        initializer=inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(QONNX, 1)],
    )
    model.ir_version = IR_VERSION
    return model


def _feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "x": (rng.standard_normal(SHAPE) * (1 + seed % 7)).astype(np.float32),
        "s2": rng.uniform(0.05, 1.5, (1, CH, 1, 1)).astype(np.float32),
    }


def _session(threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ortquant.InferenceSession(_model(), sess_options=so)


def _run_threads(n: int, body: Callable[[int], None]) -> list[BaseException]:
    errors: list[BaseException] = []
    start = threading.Barrier(n)

    def wrapped(i: int) -> None:
        try:
            start.wait()
            body(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=wrapped, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a worker thread hung"
    return errors


def test_one_session_many_threads_bit_identical():
    n_inputs = 16  # distinct inputs; thread t cycles through its own offset of them
    feeds = [_feeds(seed) for seed in range(n_inputs)]

    single = _session(1)
    expected = [single.run(None, f) for f in feeds]
    # The single-threaded results are right, not merely stable.
    w = np.linspace(-1, 1, CH * 9, dtype=np.float32).reshape(CH, 9)
    s1 = np.linspace(0.02, 0.5, CH, dtype=np.float32).reshape(1, CH, 1, 1)
    for f, (y1, y2, y3) in zip(feeds[:2], expected[:2], strict=True):
        assert_bitexact(
            y1,
            ref.quant(f["x"], s1, np.float32(0), np.float32(8), True, False, "ROUND"),
        )
        assert_bitexact(
            y2,
            ref.quant(f["x"], f["s2"], np.float32(2), np.int32(4), False, True, "FLOOR"),
        )
        assert_bitexact(y3, ref.quant(w, W_SCALE, np.float32(0), np.float32(8), True, True, "ROUND"))

    shared = _session(2)
    mismatches: list[str] = []
    counts = [0] * N_THREADS

    def body(t: int) -> None:
        for r in range(RUNS_PER_THREAD):
            k = (t * 5 + r) % n_inputs
            got = shared.run(None, feeds[k])
            for name, a, b in zip(("y1", "y2", "y3"), got, expected[k], strict=True):
                if a.shape != b.shape or a.tobytes() != b.tobytes():
                    mismatches.append(f"thread {t} run {r} input {k} output {name}")
            counts[t] += 1

    errors = _run_threads(N_THREADS, body)
    assert not errors, errors[:3]
    assert not mismatches, mismatches[:5]
    assert counts == [RUNS_PER_THREAD] * N_THREADS


def test_sessions_created_concurrently():
    """Registration and kernel creation from several threads at once (the library guards its registry)."""
    f = _feeds(99)
    want = _session(1).run(None, f)
    results: list[list[np.ndarray] | None] = [None] * 6

    def body(i: int) -> None:
        sess = _session(1 + i % 2)
        results[i] = sess.run(None, f)

    errors = _run_threads(len(results), body)
    assert not errors, errors[:3]
    for got in results:
        assert got is not None
        for a, b in zip(got, want, strict=True):
            assert_bitexact(a, b)
