"""int8 convolution: ortquant's Conv2dInt vs onnxruntime ConvInteger and QLinearConv on ResNet-like layers.

Layers (batch 1, NCHW): 3x3 64->64 at 56x56 (pad 1), 1x1 256->64 at 56x56, depthwise 3x3 128 at 28x28 stride 2
(pad 1), and 3x3 64->128 at 56x56 stride 2 (pad 1); 1 and 2 intra-op threads. Every side runs in a session with
the same options, the weights an initializer, inputs and outputs bound once (IOBinding), sampled alternately;
each figure is the median of the samples. GOPS = 2 * N * M * OH * OW * (C/group) * kh * kw / time.

- ortquant Conv2dInt: s8 x s8, int32 bias, luna requantization to int8 (o_bits=8).
- ORT ConvInteger: int32 output, u8 x s8 (x shifted by 128 with zero point 128, MLAS's u8s8 GEMM) and s8 x s8.
- ORT QLinearConv: requantized int8 output, s8 x s8 (MLAS's symmetric conv kernels) and u8 x s8.

    PYTHONPATH=python .venv/bin/python bench/bench_conv.py [--samples N] [--threads 1,2] [--quick]

`--goals` instead times only the issue-11 goal layers (adds depthwise 3x3 64 at 56x56 stride 1 and the 1-D layer
Conv1dInt k5 256->256 at L=1000, pad 2) against QLinearConv u8 x s8, ortquant and the peer alternating, at the
batch sizes of `--batch` (default 1,8). `--clock thread` measures the calling thread's CPU time instead of wall
time: with one intra-op thread onnxruntime runs the node on the calling thread, so this is immune to the time
slicing of a loaded machine (not to cache sharing); use it for 1-thread figures only. Weights are in [-127, 127]
(symmetric quantization; `--with-min` draws them from [-128, 127]; `--wmax 64` from [-64, 64], e.g. 7-bit weights,
which the AVX2 engine multiplies with any activations without the sign step). `--planes` adds a third side:
ortquant with ORTQUANT_CONV_ALGO=planes (the algorithms before issue 11) in the same alternation. Activations are
uniform over [-128, 127]; `--act relu` draws them as a ReLU leaves them (max(0, uniform): half zeros, the rest in
[1, 127]), the input of most convolutions of a CNN, which the AVX2 engine detects per call and multiplies without the
sign step.

    PYTHONPATH=python .venv/bin/python bench/bench_conv.py --goals [--batch 1,8] [--clock thread] [--samples N]
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import onnx
from bench_gemm import alternating_medians, compare, session_runner
from onnx import TensorProto, helper, numpy_helper

import ortquant

IR_VERSION = 10
# name, (C, H, W), M, k, stride, pad, group
LAYERS = [
    ("3x3 64->64 @56", (64, 56, 56), 64, 3, 1, 1, 1),
    ("1x1 256->64 @56", (256, 56, 56), 64, 1, 1, 0, 1),
    ("dw 3x3 128 @28 s2", (128, 28, 28), 128, 3, 2, 1, 128),
    ("3x3 64->128 @56 s2", (64, 56, 56), 128, 3, 2, 1, 1),
]
# The issue-11 goal layers; a (C, L) input is a 1-D layer (Conv1dInt vs QLinearConv on the same 1-D layer).
GOAL_LAYERS = [
    ("3x3 64->64 @56", (64, 56, 56), 64, 3, 1, 1, 1),
    ("3x3 64->128 @56 s2", (64, 56, 56), 128, 3, 2, 1, 1),
    ("1x1 256->64 @56", (256, 56, 56), 64, 1, 1, 0, 1),
    ("dw 3x3 128 @28 s2", (128, 28, 28), 128, 3, 2, 1, 128),
    ("dw 3x3 64 @56", (64, 56, 56), 64, 3, 1, 1, 64),
    ("1d k5 256->256 L1000", (256, 1000), 256, 5, 1, 2, 1),
]
T = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int32): TensorProto.INT32}


def _model(nodes: list[onnx.NodeProto], x: np.ndarray, y: np.ndarray, inits: list[onnx.TensorProto]) -> bytes:
    graph = helper.make_graph(
        nodes,
        "bench",
        [helper.make_tensor_value_info("x", T[x.dtype], list(x.shape))],
        [helper.make_tensor_value_info("y", T[y.dtype], list(y.shape))],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("thinker", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def conv_attrs(k: int, stride: int, pad: int, group: int, rank: int = 2) -> dict:
    """The ONNX convolution attributes of a square (rank 2) or 1-D (rank 1) layer."""
    return dict(kernel_shape=[k] * rank, strides=[stride] * rank, pads=[pad] * (2 * rank), group=group)


def conv2d_int(x: np.ndarray, wt: np.ndarray, bias: np.ndarray, y: np.ndarray, attrs: dict) -> bytes:
    """ortquant Conv2dInt (Conv1dInt for a 3-D x), o_bits=8 (scale ratio 2^-10)."""
    node = helper.make_node(
        "Conv2dInt" if x.ndim == 4 else "Conv1dInt", ["x", "w", "b"], ["y"], domain="thinker",
        scale_x=1.0, scale_w=1.0, scale_o=2.0**-10, o_bits=8,
        **attrs,
    )  # fmt: skip
    return _model([node], x, y, [numpy_helper.from_array(wt, "w"), numpy_helper.from_array(bias, "b")])


def conv_integer(x: np.ndarray, wt: np.ndarray, y: np.ndarray, attrs: dict, x_zero: np.ndarray | None) -> bytes:
    """ORT ConvInteger (int32 output), with an x zero point when given."""
    inits = [numpy_helper.from_array(wt, "w")]
    names = ["x", "w"]
    if x_zero is not None:
        inits.append(numpy_helper.from_array(x_zero, "xz"))
        names.append("xz")
    return _model([helper.make_node("ConvInteger", names, ["y"], **attrs)], x, y, inits)


def qlinear_conv(
    x: np.ndarray, x_zero: np.ndarray, wt: np.ndarray, bias: np.ndarray, y: np.ndarray, attrs: dict
) -> bytes:
    """ORT QLinearConv with int8 weights, output of x's type and zero point, per-tensor scales (ratio 2^-10)."""
    inits = [
        numpy_helper.from_array(np.float32(1.0), "xs"),
        numpy_helper.from_array(x_zero, "xz"),
        numpy_helper.from_array(wt, "w"),
        numpy_helper.from_array(np.float32(1.0), "ws"),
        numpy_helper.from_array(np.int8(0), "wz"),
        numpy_helper.from_array(np.float32(1024.0), "ys"),
        numpy_helper.from_array(x_zero, "yz"),
        numpy_helper.from_array(bias, "b"),
    ]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], **attrs)
    return _model([node], x, y, inits)


def goals(
    samples: int,
    threads_list: list[int],
    batches: list[int],
    clock: str,
    planes: bool,
    only: str,
    w127: bool,
    relu: bool = False,
    wmax: int = 0,
) -> int:
    """The issue-11 goal layers: ortquant vs QLinearConv u8 x s8, time ratio ours / peer."""
    import time

    now = time.thread_time if clock == "thread" else time.perf_counter
    print(
        f"ortquant {ortquant.__version__} (kernel {ortquant._C.gemm_kernel()}); load average "
        f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}; clock {clock}; activations "
        f"{'post-ReLU' if relu else 'signed'}; weights in [{-wmax if wmax else -127 if w127 else -128}, "
        f"{wmax if wmax else 127}]; median of {samples} alternating samples; "
        "time ratio = ortquant / QLinearConv u8s8 (lower is better)"
    )
    header = f"{'layer':<22} {'N':>2} {'thr':>3} {'ortquant ms':>11} {'QLC u8s8 ms':>11} {'ratio':>6}"
    if planes:
        header += f" {'planes ms':>10} {'planes ratio':>12}"
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for name, shape, m, k, stride, pad, group in GOAL_LAYERS:
        if only not in name:
            continue
        rank = len(shape) - 1
        c, sp = shape[0], shape[1:]
        osp = [(d + 2 * pad - k) // stride + 1 for d in sp]
        for n in batches:
            macs = n * m * int(np.prod(osp)) * (c // group) * k**rank
            x = rng.integers(-128, 128, (n, c, *sp), dtype=np.int8)
            if relu:
                x = np.maximum(x, 0)
            xu = (x.astype(np.int16) + 128).astype(np.uint8)
            # Symmetrically quantized weights, [-127, 127], as linger exports them (a -128 weight makes the AVX2
            # GEMM take w ^ (x < 0) instead of vpsignb, |w| <= 64 no sign step; see BENCHMARKS.md).
            lo, hi = (-wmax, wmax) if wmax else (-127 if w127 else -128, 127)
            wt = rng.integers(lo, hi + 1, (m, c // group, *([k] * rank)), dtype=np.int8)
            bias = rng.integers(-(2**14), 2**14, m).astype(np.int32)
            attrs = conv_attrs(k, stride, pad, group, rank)
            y8 = np.empty((n, m, *osp), np.int8)
            ours = conv2d_int(x, wt, bias, y8, attrs)
            peer = qlinear_conv(xu, np.uint8(128), wt, bias, y8.view(np.uint8), attrs)
            for threads in threads_list:
                # The outputs stay referenced while the sessions write into them (IOBinding keeps a raw pointer).
                outs = [np.empty_like(y8), np.empty(y8.shape, np.uint8), np.empty_like(y8)]
                fns = [session_runner(ours, threads, x, outs[0]), session_runner(peer, threads, xu, outs[1])]
                if planes:
                    os.environ["ORTQUANT_CONV_ALGO"] = "planes"
                    fns.append(session_runner(ours, threads, x, outs[2]))
                    del os.environ["ORTQUANT_CONV_ALGO"]
                inner = max(1, int(0.01 * 100e9 / (2 * macs)))
                med = alternating_medians(fns, samples, inner, now)
                extra = f" {1e3 * med[2]:10.3f} {med[2] / med[1]:12.2f}" if planes else ""
                print(
                    f"{name:<22} {n:>2} {threads:>3} {1e3 * med[0]:11.3f} {1e3 * med[1]:11.3f} "
                    f"{med[0] / med[1]:6.2f}{extra}",
                    flush=True,
                )
    return 0


def main() -> int:
    """Runs the benchmark and prints one table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=11, help="timed samples per figure (median reported)")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="few samples (a smoke test)")
    ap.add_argument("--goals", action="store_true", help="only the issue-11 goal layers vs QLinearConv u8s8")
    ap.add_argument("--batch", default="1,8", help="batch sizes of --goals")
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall", help="timer of --goals")
    ap.add_argument("--planes", action="store_true", help="--goals: also the pre-issue-11 algorithms")
    ap.add_argument("--only", default="", help="--goals: only layers whose name contains this")
    ap.add_argument("--with-min", action="store_true", help="--goals: weights in [-128, 127] instead of [-127, 127]")
    ap.add_argument("--act", choices=["signed", "relu"], default="signed", help="--goals: activation distribution")
    ap.add_argument("--wmax", type=int, default=0, help="--goals: weights in [-WMAX, WMAX] (1-127; 0: see --with-min)")
    args = ap.parse_args()
    if not 0 <= args.wmax <= 127:
        ap.error(f"--wmax must be in [0, 127], got {args.wmax}")
    samples = 3 if args.quick else args.samples
    threads_list = [int(t) for t in args.threads.split(",")]
    if args.goals:
        batches = [int(b) for b in args.batch.split(",")]
        return goals(
            samples,
            threads_list,
            batches,
            args.clock,
            args.planes,
            args.only,
            not args.with_min,
            args.act == "relu",
            args.wmax,
        )
    print(
        f"ortquant {ortquant.__version__}; load average {' '.join(f'{v:.1f}' for v in os.getloadavg())}; "
        f"median of {samples} samples; GOPS; ratio = ortquant GOPS / ORT GOPS"
    )
    header = (
        f"{'layer':<20} {'thr':>3} {'ortquant':>9} {'ConvInt u8s8':>13} {'ConvInt s8s8':>13} {'QLinConv s8s8':>14} "
        f"{'QLinConv u8s8':>14} {'vs CI u8s8':>10} {'vs QLC s8s8':>11} {'vs QLC u8s8':>11}"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for name, (c, h, w), m, k, stride, pad, group in LAYERS:
        oh = (h + 2 * pad - k) // stride + 1
        ow = (w + 2 * pad - k) // stride + 1
        ops = 2.0 * m * oh * ow * (c // group) * k * k
        x = rng.integers(-128, 128, (1, c, h, w), dtype=np.int8)
        xu = (x.astype(np.int16) + 128).astype(np.uint8)
        wt = rng.integers(-128, 128, (m, c // group, k, k), dtype=np.int8)
        bias = rng.integers(-(2**14), 2**14, m).astype(np.int32)
        attrs = conv_attrs(k, stride, pad, group)
        y8 = np.empty((1, m, oh, ow), np.int8)
        y32 = np.empty((1, m, oh, ow), np.int32)
        ours = conv2d_int(x, wt, bias, y8, attrs)
        ci_u8 = conv_integer(xu, wt, y32, attrs, np.uint8(128))
        ci_s8 = conv_integer(x, wt, y32, attrs, None)
        qlc_s8 = qlinear_conv(x, np.int8(0), wt, bias, y8, attrs)
        qlc_u8 = qlinear_conv(xu, np.uint8(128), wt, bias, y8.view(np.uint8), attrs)
        for threads in threads_list:
            outs = [np.empty_like(y8), np.empty_like(y32), np.empty_like(y32), np.empty_like(y8)]
            outs.append(np.empty(y8.shape, np.uint8))
            fns = [
                session_runner(ours, threads, x, outs[0]),
                session_runner(ci_u8, threads, xu, outs[1]),
                session_runner(ci_s8, threads, x, outs[2]),
                session_runner(qlc_s8, threads, x, outs[3]),
                session_runner(qlc_u8, threads, xu, outs[4]),
            ]
            inner = max(1, int(0.02 * 400e9 / ops / threads))
            res = compare(fns, samples, [inner, inner, max(1, inner // 8), inner, inner])
            g = [ops / t / 1e9 for t, _ in res]
            assert np.array_equal(outs[1], outs[2]), "ConvInteger u8s8 and s8s8 differ"
            print(
                f"{name:<20} {threads:>3} {g[0]:9.0f} {g[1]:13.0f} {g[2]:13.1f} {g[3]:14.0f} {g[4]:14.0f} "
                f"{g[0] / g[1]:9.2f}x {g[0] / g[3]:10.2f}x {g[0] / g[4]:10.2f}x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
