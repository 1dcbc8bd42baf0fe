"""ConvTranspose2dInt (torch padding meaning, output_padding, groups, dilations): the core on every kernel path
and the op through onnxruntime, bit-exact against the numpy int64 reference; validation errors."""

from __future__ import annotations

import numpy as np
import pytest
from matrix_util import DOMAINS, KERNELS, int8_data, out_attrs, run_matrix

from conftest import ORT_ERRORS, assert_bitexact
from ortquant import _C
from ortquant.reference import linger_matrix as ref

# (N, C, H, W, M/group, kh, kw, strides, pads [t, l, b, r], dilations, output_padding, group)
CASES = [
    (1, 3, 4, 4, 4, 3, 3, (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 1),
    (1, 4, 3, 3, 2, 4, 4, (2, 2), (1, 1, 1, 1), (1, 1), (0, 0), 1),
    (2, 4, 5, 3, 6, 3, 2, (1, 3), (0, 1, 2, 0), (2, 1), (1, 2), 2),
    (1, 6, 4, 4, 3, 3, 3, (3, 3), (0, 0, 0, 0), (1, 1), (2, 0), 3),
    (1, 8, 6, 5, 70, 2, 2, (2, 2), (0, 0, 0, 0), (1, 1), (0, 0), 1),
    (1, 1, 1, 1, 1, 1, 1, (1, 1), (0, 0, 0, 0), (1, 1), (0, 0), 1),
    (1, 5, 7, 2, 3, 5, 3, (1, 2), (2, 1, 2, 1), (1, 1), (0, 1), 1),
]


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_conv_transpose_core(kernel, case, rng):
    n, c, h, w, mg, kh, kw, s, p, d, op, g = case
    x = int8_data(rng, (n, c, h, w), extreme=0.2)
    wt = int8_data(rng, (c, mg, kh, kw), extreme=0.2)
    b = rng.integers(-5000, 5000, mg * g).astype(np.int32)
    args = dict(
        strides=list(s),
        pads=list(p),
        dilations=list(d),
        group=g,
        kernel=kernel,
        transposed=True,
        output_padding=list(op),
    )
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), **args)
    assert_bitexact(got, ref.conv_transpose2d(x, wt, b, 64.0, 128.0, 16.0, 8, s, p, d, op, g))
    got = _C.conv2d(x, wt, b, kind="float", fscale=1.0 / (64 * 128), **args)
    assert_bitexact(got, ref.conv_transpose2d(x, wt, b, 64.0, 128.0, None, None, s, p, d, op, g))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
def test_conv_transpose_core_weights_without_minus_128(kernel, case, rng):
    # Weights in [-127, 127] take the AVX2 vpmaddubsw GEMM kernel for the column sums.
    n, c, h, w, mg, kh, kw, s, p, d, op, g = case
    x = int8_data(rng, (n, c, h, w), extreme=0.3)
    wt = np.maximum(int8_data(rng, (c, mg, kh, kw), extreme=0.3), -127).astype(np.int8)
    b = rng.integers(-5000, 5000, mg * g).astype(np.int32)
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=g, kernel=kernel, transposed=True)
    got = _C.conv2d(x, wt, b, kind="int8", ratio=16.0 / (64 * 128), output_padding=list(op), **args)
    assert_bitexact(got, ref.conv_transpose2d(x, wt, b, 64.0, 128.0, 16.0, 8, s, p, d, op, g))


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("o_bits,scale_o", [(8, 256.0), (16, 2.0**14), (None, None)])
@pytest.mark.parametrize("case", CASES[:4])
@pytest.mark.parametrize("const", [True, False])
def test_conv_transpose_ort(domain, o_bits, scale_o, case, const, rng):
    n, c, h, w, mg, kh, kw, s, p, d, op, g = case
    x = int8_data(rng, (n, c, h, w), extreme=0.2)
    wt = int8_data(rng, (c, mg, kh, kw), extreme=0.2)
    b = rng.integers(-5000, 5000, mg * g).astype(np.int32)
    attrs = out_attrs(o_bits, scale_o, scale_x=64.0, scale_w=512.0)
    attrs.update(
        kernel_shape=[kh, kw], strides=list(s), pads=list(p), dilations=list(d), output_padding=list(op), group=g
    )
    got = run_matrix("ConvTranspose2dInt", [x, wt, b], attrs, const=[False, const, const], domain=domain)
    assert_bitexact(got, ref.conv_transpose2d(x, wt, b, 64.0, 512.0, scale_o, o_bits, s, p, d, op, g))


def test_conv_transpose_no_bias_defaults(rng):
    x = int8_data(rng, (2, 3, 4, 5))
    wt = int8_data(rng, (3, 2, 2, 3))
    got = run_matrix("ConvTranspose2dInt", [x, wt], out_attrs(8, 32.0, scale_x=16.0, scale_w=64.0), const=[False, True])
    assert_bitexact(got, ref.conv_transpose2d(x, wt, None, 16.0, 64.0, 32.0, 8))


def _expect_error(inputs, attrs, const, *causes):
    with pytest.raises(ORT_ERRORS) as e:
        run_matrix("ConvTranspose2dInt", inputs, attrs, const=const)
    msg = str(e.value)
    assert "convtranspose2dint_node" in msg, msg
    for cause in causes:
        assert cause in msg, msg


def test_conv_transpose_errors(rng):
    a = out_attrs(8, 1.0, scale_x=1.0, scale_w=1.0)
    x = int8_data(rng, (1, 4, 3, 3))
    w = np.zeros((4, 2, 3, 3), np.int8)
    _expect_error([x, w], dict(a, strides=[2, 2], output_padding=[2, 0]), [False, True], "output_padding")
    _expect_error([x, w], dict(a, output_padding=[0, -1]), [False, True], "output_padding")
    _expect_error([int8_data(rng, (1, 5, 3, 3)), w], a, [False, True], "5 channels", "expect 4")
    _expect_error([x, np.zeros((4, 2, 3, 3), np.int8)], dict(a, group=3), [False, True], "multiple of group")
    _expect_error([x, w], dict(a, pads=[3, 3, 3, 3]), [False, True], "output height would be")
    _expect_error([x, w], dict(a, kernel_shape=[2, 2]), [False, True], "kernel_shape", "does not match")
    _expect_error([x, np.zeros((4, 2, 3, 3), np.uint8)], a, [False, True], "weight must be int8")
    _expect_error([x, w], dict(a, output_shape=[5, 5]), [False, True], "output_shape")
    _expect_error([x, w, np.zeros(3, np.int32)], a, [False, True, True], "bias must have shape [2]")


def _requant(acc: np.ndarray, bias: np.ndarray, ratio: float, lo: int, hi: int) -> np.ndarray:
    """luna requantization of exact int64 sums, computed independently in float64: floor((t + b) * r + 0.5)."""
    v = acc.astype(np.float64) + bias.astype(np.float64)[None, :, None, None]
    return np.clip(np.floor(v * ratio + 0.5), lo, hi)


def _random_case(case: tuple, kernel: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict, np.ndarray]:
    """Input, weights (30% extremes), _C.conv2d arguments and the exact int64 sums of one transposed case."""
    n, c, h, w, mg, kh, kw, s, p, d, op, g = case
    x = int8_data(rng, (n, c, h, w), extreme=0.3)
    wt = int8_data(rng, (c, mg, kh, kw), extreme=0.3)
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=g, kernel=kernel, transposed=True)
    args["output_padding"] = list(op)
    return x, wt, args, ref.conv_transpose2d_acc(x, wt, None, s, p, d, op, g)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES[:5])
def test_conv_transpose_core_every_output_kind(kernel, case, rng):
    # int16, int32 and raw outputs (the row epilogue's other branches), against the int64 reference sums.
    x, wt, args, acc = _random_case(case, kernel, rng)
    b = rng.integers(-5000, 5000, acc.shape[1]).astype(np.int32)
    got = _C.conv2d(x, wt, b, kind="int16", ratio=0.37, lo=-(2**15), hi=2**15 - 1, **args)
    assert got.dtype == np.int16
    assert_bitexact(got, _requant(acc, b, 0.37, -(2**15), 2**15 - 1).astype(np.int16))
    got = _C.conv2d(x, wt, b, kind="int32", ratio=3.0, lo=-(2**31), hi=2**31 - 1, **args)
    assert_bitexact(got, _requant(acc, b, 3.0, -(2**31), 2**31 - 1).astype(np.int32))
    got = _C.conv2d(x, wt, b, kind="raw", **args)
    assert_bitexact(got, acc.astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("seed", range(6))
def test_conv_transpose_core_random_geometry(kernel, seed):
    # Random strides (1..4, often unequal), dilations, asymmetric pads, output_padding, groups and sizes: the
    # stride-phase accumulator planes and the per-tap column ranges against the int64 reference.
    rng = np.random.default_rng(1000 + seed)
    for _ in range(8):
        g = int(rng.integers(1, 3))
        c, mg = g * int(rng.integers(1, 5)), int(rng.integers(1, 5))
        kh, kw = (int(v) for v in rng.integers(1, 5, 2))
        sh, sw = (int(v) for v in rng.integers(1, 5, 2))
        dh, dw = (int(v) for v in rng.integers(1, 3, 2))
        h, w = (int(v) for v in rng.integers(1, 7, 2))
        p = [int(rng.integers(0, dh * (kh - 1) + 1)), int(rng.integers(0, dw * (kw - 1) + 1))]
        p += [int(rng.integers(0, dh * (kh - 1) + 1)), int(rng.integers(0, dw * (kw - 1) + 1))]
        op = [int(rng.integers(0, max(sh, dh))), int(rng.integers(0, max(sw, dw)))]
        oh = (h - 1) * sh + dh * (kh - 1) + 1 + op[0] - p[0] - p[2]
        ow = (w - 1) * sw + dw * (kw - 1) + 1 + op[1] - p[1] - p[3]
        if oh < 1 or ow < 1:
            continue
        x = int8_data(rng, (int(rng.integers(1, 3)), c, h, w), extreme=0.3)
        wt = int8_data(rng, (c, mg, kh, kw), extreme=0.3)
        b = rng.integers(-5000, 5000, mg * g).astype(np.int32)
        args = dict(strides=[sh, sw], pads=p, dilations=[dh, dw], group=g, kernel=kernel, transposed=True)
        args["output_padding"] = op
        cfg = (x.shape, wt.shape, args)
        acc = ref.conv_transpose2d_acc(x, wt, None, (sh, sw), tuple(p), (dh, dw), tuple(op), g)
        assert_bitexact(_C.conv2d(x, wt, b, kind="raw", **args), acc.astype(np.int32)), cfg
        got = _C.conv2d(x, wt, b, kind="int8", ratio=1.0 / 64, **args)
        assert_bitexact(got, _requant(acc, b, 1.0 / 64, -128, 127).astype(np.int8)), cfg


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("stride,c,k", [(1, 16384, 3), (2, 40000, 4)])
def test_conv_transpose_core_sums_beyond_int32(kernel, stride, c, k):
    # Stride 1: 16384 input channels x 3x3 taps, an output sums 147456 products of -128 * -128 = 2.4e9 > 2^31;
    # stride 2: 40000 channels x the 4 taps of a 4x4 kernel that reach an output, 2.6e9. col2im must accumulate in
    # int64 here (int32 is used only when cg * kh * kw < 2^17 guarantees it cannot overflow).
    m = 2
    x = np.full((1, c, 3, 3), -128, np.int8)
    wt = np.full((c, m, k, k), -128, np.int8)
    wt[:, 1] = 127
    b = np.array([7, -7], np.int32)
    args = dict(strides=[stride] * 2, pads=[1, 1, 1, 1], dilations=[1, 1], group=1, kernel=kernel, transposed=True)
    acc = ref.conv_transpose2d_acc(x, wt, None, (stride, stride), (1, 1, 1, 1), (1, 1), (0, 0), 1)
    assert acc.max() > 2**31 and acc.min() < -(2**31)  # the case really exceeds int32 both ways
    got = _C.conv2d(x, wt, b, kind="float", fscale=1.0, **args)
    assert_bitexact(got, (acc.astype(np.float64) + b[None, :, None, None]).astype(np.float32))
    got = _C.conv2d(x, wt, b, kind="int32", ratio=0.5, lo=-(2**31), hi=2**31 - 1, **args)
    assert_bitexact(got, _requant(acc, b, 0.5, -(2**31), 2**31 - 1).astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("bound", [7, 127])
def test_conv_transpose_core_nonneg_input(kernel, case, bound, rng):
    # A non-negative input (after a ReLU) takes the AVX2 product without the sign step, -128 weights included.
    n, c, h, w, mg, kh, kw, s, p, d, op, g = case
    x = rng.integers(0, bound + 1, (n, c, h, w), dtype=np.int8)
    x.reshape(-1)[0] = bound
    wt = int8_data(rng, (c, mg, kh, kw), extreme=0.3)
    args = dict(strides=list(s), pads=list(p), dilations=list(d), group=g, kernel=kernel, transposed=True)
    got = _C.conv2d(x, wt, None, kind="raw", output_padding=list(op), **args)
    assert_bitexact(got, ref.conv_transpose2d_acc(x, wt, None, s, p, d, op, g).astype(np.int32))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("case", CASES[:5])
def test_conv_transpose_core_power_of_two_ratios(kernel, case, rng):
    # Ratios 2^-shift take the int32 shift epilogue when sums + bias + rounding fit int32 (shift 0, 1, 30, with
    # int8/int16/int32 outputs); a bias near 2^31 does not fit, and the float64 epilogue must give the same rule.
    x, wt, args, acc = _random_case(case, kernel, rng)
    for shift, kind, lo, hi, dt in [
        (0, "int32", -(2**31), 2**31 - 1, np.int32),
        (1, "int8", -128, 127, np.int8),
        (7, "int16", -(2**15), 2**15 - 1, np.int16),
        (30, "int8", -128, 127, np.int8),
    ]:
        for bmag in (5000, 2**31 - 1):
            b = rng.integers(-bmag, bmag, acc.shape[1], endpoint=True).astype(np.int32)
            got = _C.conv2d(x, wt, b, kind=kind, ratio=2.0**-shift, lo=lo, hi=hi, **args)
            assert_bitexact(got, _requant(acc, b, 2.0**-shift, lo, hi).astype(dt))
