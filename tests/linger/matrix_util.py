"""Helpers of the linger matrix-op tests (issue 4): kernel paths, int8 data with extreme values, one-node models."""

from __future__ import annotations

from typing import Any

import numpy as np

from conftest import NP_TO_ONNX, assert_bitexact, make_node_model, run_model
from ortquant import _C
from ortquant.reference import linger_matrix as ref

DOMAINS = ["thinker", "onnxinfer"]
KERNELS: list[str] = list(_C.gemm_kernels())  # every GEMM path this CPU runs (scalar is the oracle)


def int8_data(rng: np.random.Generator, shape: tuple[int, ...], extreme: float = 0.0) -> np.ndarray:
    """Random int8; a fraction ``extreme`` of the elements is set to -128 or 127, and the first few are edges."""
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    if extreme:
        mask = rng.random(shape) < extreme
        x[mask] = rng.choice(np.array([-128, 127], np.int8), size=int(mask.sum()))
    flat = x.reshape(-1)
    edges = np.array([-128, 127, -128, -1, 0, 1], np.int8)
    flat[: min(edges.size, flat.size)] = edges[: flat.size]
    return x


def check_conv_epilogues(
    x: np.ndarray, wt: np.ndarray, b: np.ndarray | None, case: tuple, kernel: str, threads: int = 1
) -> None:
    """One convolution (``case[7:]`` = strides, pads, dilations, group) through ``_C.conv2d`` with every epilogue,
    bit for bit against the reference: int8 with a general and a power-of-two ratio (the int32 shift epilogue) and a
    narrow range, int16, float and the raw int32 sums."""
    s, p, d, g = case[7:]
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=g, kernel=kernel, threads=threads)
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 8, s, p, d, g))
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), lo=-8.0, hi=7.0, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 64.0, 128.0, 16.0, 4, s, p, d, g))
    got = _C.conv2d(x, wt, b, kind="int16", ratio=1.0 / 8, lo=-32768.0, hi=32767.0, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 8.0, 1.0, 1.0, 16, s, p, d, g))
    got = _C.conv2d(x, wt, b, kind="float", fdiv=3.0 * 128, **args)
    assert_bitexact(got, ref.conv2d(x, wt, b, 3.0, 128.0, None, None, s, p, d, g))
    got = _C.conv2d(x, wt, None, kind="raw", **args)
    assert_bitexact(got, ref.conv2d_acc(x, wt, None, s, p, d, g).astype(np.int32))


def out_attrs(o_bits: int | None, scale_o: float | None, **scales: float) -> dict[str, Any]:
    """Attributes of a matrix op: the input scales, plus scale_o/o_bits when o_bits is given."""
    attrs: dict[str, Any] = dict(scales)
    attrs["platform_quant"] = "luna_quant"
    if o_bits is not None:
        attrs["o_bits"] = o_bits
        attrs["scale_o"] = scale_o
    return attrs


def run_matrix(
    op: str,
    inputs: list[np.ndarray | None],
    attrs: dict[str, Any],
    *,
    const: list[bool] | bool = False,
    domain: str = "thinker",
    threads: int = 1,
) -> np.ndarray:
    """Runs one linger matrix node through onnxruntime + ortquant; the output dtype follows o_bits."""
    model, feeds = matrix_model(op, inputs, attrs, const=const, domain=domain)
    return run_model(model, feeds, threads=threads)[0]


def matrix_model(
    op: str,
    inputs: list[np.ndarray | None],
    attrs: dict[str, Any],
    *,
    const: list[bool] | bool = False,
    domain: str = "thinker",
):
    """The one-node model of ``run_matrix`` and its feeds."""
    dtype = ref.out_dtype(attrs.get("o_bits"))
    return make_node_model(op, domain, inputs, const=const, attrs=attrs, output_dtypes=[NP_TO_ONNX[dtype]])
