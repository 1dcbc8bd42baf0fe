"""Transposed convolution: ortquant's ConvTranspose2dInt vs the routes a user has in stock onnxruntime.

Decoder-style upsampling layers (batch 1 by default, NCHW, int8 codes in [-128, 127], weights in [-127, 127]):

- `ours`: thinker ConvTranspose2dInt, s8 x s8, int32 bias, luna requantization to int8 (o_bits=8).
- `float ConvT`: onnxruntime's float ConvTranspose on the same values as float32 (the float original).
- `ConvInt stuffed`: onnxruntime's ConvInteger u8 x s8 (zero point 128, MLAS's u8s8 path) on the input already
  zero-stuffed and padded by the script (stride-1 convolution with the flipped, transposed kernel), int32 out.
- `QLConv stuffed`: QLinearConv u8 x s8 on the same stuffed input (requantized u8 output): the fastest int8 route.

The two stuffed peers do not pay for the stuffing itself (the script prepares it once): they are optimistic. Before
timing, ConvInteger's int32 result is checked against the float ConvTranspose of the same integer values (exact:
every partial sum is an integer far below 2^24 in magnitude here) so that all sides compute the same layer. Each
side runs in its own session (one intra-op thread, weights as initializers, IOBinding), the four alternate, and
each figure is the median of the samples; `--clock thread` times the calling thread's CPU time (immune to time
slicing on a loaded machine). Ratio = time of ours / time of the peer (< 1: ortquant faster).

    PYTHONPATH=python .venv/bin/python bench/bench_convtranspose.py [--samples N] [--clock thread] [--batch 1]

`--act relu` draws the input as a ReLU leaves it (max(0, uniform)), which ortquant's AVX2 engine detects per call.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import onnx
import onnxruntime as ort
from bench_gemm import alternating_medians, session_runner
from onnx import TensorProto, helper, numpy_helper

import ortquant

IR_VERSION = 10
# name, C_in, H (= W), C_out, k, stride, pad, output_padding
LAYERS = [
    ("4x4 s2 p1 64->32 @28", 64, 28, 32, 4, 2, 1, 0),
    ("3x3 s2 p1 op1 32->16 @56", 32, 56, 16, 3, 2, 1, 1),
    ("2x2 s2 128->64 @28", 128, 28, 64, 2, 2, 0, 0),
    ("4x4 s2 p1 256->128 @14", 256, 14, 128, 4, 2, 1, 0),
]
T = {
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.float32): TensorProto.FLOAT,
}


def _model(node: onnx.NodeProto, x: np.ndarray, y: np.ndarray, inits: list[onnx.TensorProto]) -> bytes:
    graph = helper.make_graph(
        [node],
        "bench",
        [helper.make_tensor_value_info("x", T[x.dtype], list(x.shape))],
        [helper.make_tensor_value_info("y", T[y.dtype], list(y.shape))],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("thinker", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = IR_VERSION
    return model.SerializeToString()


def _convt_attrs(k: int, stride: int, pad: int, opad: int) -> dict:
    return dict(kernel_shape=[k, k], strides=[stride] * 2, pads=[pad] * 4, output_padding=[opad] * 2, group=1)


def conv_transpose_int(x: np.ndarray, w: np.ndarray, bias: np.ndarray, y: np.ndarray, attrs: dict) -> bytes:
    """thinker ConvTranspose2dInt, o_bits=8 (scale ratio 2^-10)."""
    node = helper.make_node(
        "ConvTranspose2dInt", ["x", "w", "b"], ["y"], domain="thinker",
        scale_x=1.0, scale_w=1.0, scale_o=2.0**-10, o_bits=8, dilations=[1, 1], **attrs,
    )  # fmt: skip
    return _model(node, x, y, [numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])


def float_conv_transpose(x: np.ndarray, w: np.ndarray, y: np.ndarray, attrs: dict) -> bytes:
    return _model(
        helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs), x, y, [numpy_helper.from_array(w, "w")]
    )


def stuffed(xu: np.ndarray, k: int, stride: int, pad: int, opad: int) -> np.ndarray:
    """The u8 input (zero point 128) zero-stuffed by the stride and padded by k-1-pad (+ output_padding at the end)."""
    n, c, h, w = xu.shape
    e = k - 1 - pad
    hs, ws = (h - 1) * stride + 1, (w - 1) * stride + 1
    out = np.full((n, c, hs + 2 * e + opad, ws + 2 * e + opad), 128, np.uint8)
    out[:, :, e : e + hs : stride, e : e + ws : stride] = xu
    return out


def conv_integer(xs: np.ndarray, wf: np.ndarray, y: np.ndarray, k: int) -> bytes:
    inits = [numpy_helper.from_array(wf, "w"), numpy_helper.from_array(np.uint8(128), "xz")]
    node = helper.make_node("ConvInteger", ["x", "w", "xz"], ["y"], kernel_shape=[k, k])
    return _model(node, xs, y, inits)


def qlinear_conv(xs: np.ndarray, wf: np.ndarray, bias: np.ndarray, y: np.ndarray, k: int) -> bytes:
    inits = [
        numpy_helper.from_array(np.float32(1.0), "xs"),
        numpy_helper.from_array(np.uint8(128), "xz"),
        numpy_helper.from_array(wf, "w"),
        numpy_helper.from_array(np.float32(1.0), "ws"),
        numpy_helper.from_array(np.int8(0), "wz"),
        numpy_helper.from_array(np.float32(1024.0), "ys"),
        numpy_helper.from_array(np.uint8(128), "yz"),
        numpy_helper.from_array(bias, "b"),
    ]
    node = helper.make_node(
        "QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"], kernel_shape=[k, k]
    )
    return _model(node, xs, y, inits)


def _run_once(model: bytes, x: np.ndarray) -> np.ndarray:
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


def main() -> int:
    """Runs the benchmark and prints one table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=11)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--clock", choices=["wall", "thread"], default="wall")
    ap.add_argument("--quick", action="store_true", help="3 samples (a smoke test)")
    ap.add_argument("--act", choices=["signed", "relu"], default="signed", help="input distribution")
    args = ap.parse_args()
    samples = 3 if args.quick else args.samples
    now = time.thread_time if args.clock == "thread" else time.perf_counter
    print(
        f"ortquant {ortquant.__version__}, onnxruntime {ort.__version__}; load average "
        f"{' '.join(f'{v:.1f}' for v in os.getloadavg())}; clock {args.clock}; batch {args.batch}; one thread; "
        f"median of {samples} alternating samples; ratio = ours / peer"
    )
    header = (
        f"{'layer':<26} {'ours ms':>8} {'float ConvT':>11} {'ConvInt stf':>11} {'QLConv stf':>10} "
        f"{'vs float':>8} {'vs CI':>6} {'vs QLC':>6}"
    )
    print(header)
    print("-" * len(header))
    rng = np.random.default_rng(0)
    for name, c, h, m, k, stride, pad, opad in LAYERS:
        n = args.batch
        oh = (h - 1) * stride - 2 * pad + k + opad
        x = rng.integers(-128, 128, (n, c, h, h), dtype=np.int8)
        if args.act == "relu":
            x = np.maximum(x, 0)
        xu = (x.astype(np.int16) + 128).astype(np.uint8)
        w = rng.integers(-127, 128, (c, m, k, k), dtype=np.int8)  # ConvTranspose layout [C_in, C_out, k, k]
        wf = np.ascontiguousarray(w.transpose(1, 0, 2, 3)[:, :, ::-1, ::-1])  # the equivalent stride-1 conv kernel
        bias = rng.integers(-(2**14), 2**14, m).astype(np.int32)
        attrs = _convt_attrs(k, stride, pad, opad)
        xs = stuffed(xu, k, stride, pad, opad)
        y8 = np.empty((n, m, oh, oh), np.int8)
        yf = np.empty((n, m, oh, oh), np.float32)
        y32 = np.empty((n, m, oh, oh), np.int32)
        models = [
            (conv_transpose_int(x, w, bias, y8, attrs), x, y8),
            (float_conv_transpose(x.astype(np.float32), w.astype(np.float32), yf, attrs), x.astype(np.float32), yf),
            (conv_integer(xs, wf, y32, k), xs, y32),
            (qlinear_conv(xs, wf, bias, y8.view(np.uint8), k), xs, y8.view(np.uint8)),
        ]
        # The peers compute the same layer: the stuffed ConvInteger equals the float ConvTranspose exactly.
        ref = _run_once(models[1][0], models[1][1])
        got = _run_once(models[2][0], models[2][1])
        assert np.array_equal(got.astype(np.float64), ref.astype(np.float64)), f"{name}: peers disagree"
        outs = [np.empty_like(y) for _, _, y in models]
        fns = [session_runner(mb, 1, xin, o) for (mb, xin, _), o in zip(models, outs, strict=True)]
        macs = n * m * oh * oh * c * k * k
        inner = max(1, int(0.01 * 50e9 / (2 * macs)))
        med = alternating_medians(fns, samples, inner, now)
        print(
            f"{name:<26} {1e3 * med[0]:8.3f} {1e3 * med[1]:11.3f} {1e3 * med[2]:11.3f} {1e3 * med[3]:10.3f} "
            f"{med[0] / med[1]:8.2f} {med[0] / med[2]:6.2f} {med[0] / med[3]:6.2f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
