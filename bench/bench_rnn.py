"""LSTMInt / GRUInt latency against onnxruntime's float LSTM / GRU on the same shapes, in the same run.

Usage: PYTHONPATH=python python bench/bench_rnn.py [--threads 1 2] [--repeat 50] [--quick]
Prints a markdown table (the figures of BENCHMARKS.md, section "linger LSTMInt / GRUInt").
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

import ortquant

IR_VERSION = 10


def int_model(lstm: bool, t: int, b: int, h: int, d: int, rng: np.random.Generator) -> onnx.ModelProto:
    """One LSTMInt/GRUInt node (thinker domain), int8 in/out, constant int8 weights and int32 biases."""
    g = (4 if lstm else 3) * h
    inits = [
        numpy_helper.from_array(rng.integers(-128, 128, (g, d)).astype(np.int8), "w_ih"),
        numpy_helper.from_array(rng.integers(-128, 128, (g, h)).astype(np.int8), "w_hh"),
        numpy_helper.from_array(rng.integers(-3000, 3000, g).astype(np.int32), "b_ih"),
        numpy_helper.from_array(rng.integers(-3000, 3000, g).astype(np.int32), "b_hh"),
    ]
    outs = ["y", "hn", "cn"] if lstm else ["y", "hn"]
    node = helper.make_node(
        "LSTMInt" if lstm else "GRUInt", ["x", "w_ih", "w_hh", "b_ih", "b_hh"], outs, domain="thinker",
        hidden_size=h, input_size=d, num_layers=1, batch_first=0, go_forward=1, dropout=0.0, scale_i=64.0,
        scale_h=128.0, scale_iw=256.0, scale_hw=256.0, scale_o=128.0, o_bits=8, data_bits=8, parameter_bits=8,
        platform_quant="luna_quant",
    )  # fmt: skip
    graph = helper.make_graph(
        [node],
        "rnn_int",
        [helper.make_tensor_value_info("x", TensorProto.INT8, [t, b, d])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, None)]
        + [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs[1:]],
        initializer=inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("thinker", 1)])
    m.ir_version = IR_VERSION
    return m


def float_model(lstm: bool, t: int, b: int, h: int, d: int, rng: np.random.Generator) -> onnx.ModelProto:
    """onnxruntime's own LSTM / GRU (float32) with the same sizes."""
    g = (4 if lstm else 3) * h
    inits = [
        numpy_helper.from_array((rng.standard_normal((1, g, d)) * 0.1).astype(np.float32), "W"),
        numpy_helper.from_array((rng.standard_normal((1, g, h)) * 0.1).astype(np.float32), "R"),
        numpy_helper.from_array((rng.standard_normal((1, 2 * g)) * 0.1).astype(np.float32), "B"),
    ]
    outs = ["y", "hn", "cn"] if lstm else ["y", "hn"]
    node = helper.make_node("LSTM" if lstm else "GRU", ["x", "W", "R", "B"], outs, hidden_size=h)
    graph = helper.make_graph(
        [node],
        "rnn_float",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [t, b, d])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        initializer=inits,
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = IR_VERSION
    return m


def paired_latency_ms(a, feeds_a: dict, b, feeds_b: dict, repeat: int) -> tuple[float, float]:
    """Median wall time (ms) of one run of session a and of session b, measured alternately so that both see the
    same machine load (after warm-up)."""
    for _ in range(5):
        a.run(None, feeds_a)
        b.run(None, feeds_b)
    ta, tb = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        a.run(None, feeds_a)
        t1 = time.perf_counter()
        b.run(None, feeds_b)
        t2 = time.perf_counter()
        ta.append(t1 - t0)
        tb.append(t2 - t1)
    return statistics.median(ta) * 1e3, statistics.median(tb) * 1e3


def session(model: onnx.ModelProto, threads: int, with_ortquant: bool):
    """A CPU session with `threads` intra-op threads (ortquant registered for the int models)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    if with_ortquant:
        return ortquant.InferenceSession(model, sess_options=so)
    return ort.InferenceSession(model.SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])


def main() -> None:
    """Run the benchmark grid and print the markdown table."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--t", type=int, default=100)
    ap.add_argument("--quick", action="store_true", help="smoke run: 5 samples")
    args = ap.parse_args()
    if args.quick:
        args.repeat = 5
    rng = np.random.default_rng(0)
    print(
        f"T={args.t}, D=H, median of {args.repeat} alternating runs; "
        "ratio = onnxruntime float / ortquant int8 (> 1: ortquant faster)"
    )
    print()
    print("| op | B | H | threads | ortquant int8 (ms) | onnxruntime float (ms) | ratio |")
    print("|---|---|---|---|---|---|---|")
    for lstm in (True, False):
        for b in (1, 8):
            for h in (128, 256):
                x8 = rng.integers(-128, 128, (args.t, b, h)).astype(np.int8)
                xf = rng.standard_normal((args.t, b, h)).astype(np.float32)
                mi, mf = int_model(lstm, args.t, b, h, h, rng), float_model(lstm, args.t, b, h, h, rng)
                for threads in args.threads:
                    ti, tf = paired_latency_ms(
                        session(mi, threads, True), {"x": x8}, session(mf, threads, False), {"x": xf}, args.repeat
                    )
                    name = "LSTMInt vs LSTM" if lstm else "GRUInt vs GRU"
                    print(f"| {name} | {b} | {h} | {threads} | {ti:.3f} | {tf:.3f} | {tf / ti:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
