"""numpy reference of the structural QONNX ops (spec: shared/specs/qonnx.md sections 5-10, decisions 1 and 8).

MultiThreshold, XnorPopcountMatMul, Im2Col, MaxPoolNHWC, QuantAvgPool2d and DebugMarker, written from the
spec with plain loops over windows, independent of the C++ kernels. Every function takes and returns float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

F32 = np.float32
INT64_MIN = np.iinfo(np.int64).min


def multithreshold(
    x: np.ndarray,
    thresholds: np.ndarray,
    out_scale: float = 1.0,
    out_bias: float = 0.0,
    data_layout: str = "NCHW",
) -> np.ndarray:
    """``out_scale * count_t(x >= thresholds[c, t]) + out_bias`` for each element x of channel c.

    qonnx main's channel rule (decision 8): channels on the last axis if ``data_layout`` ends in ``"C"``,
    else on axis 1 (an empty layout counts as the default ``"NCHW"``). ``thresholds`` is (C or 1, T).
    The count is of comparisons that hold: NaN x counts 0, NaN thresholds never count.
    """
    x = np.asarray(x, F32)
    thresholds = np.asarray(thresholds, F32)
    if thresholds.ndim != 2:
        raise ValueError("thresholds must be 2-D")
    channels_last = data_layout.endswith("C")
    if x.ndim == 0 or (not channels_last and x.ndim < 2):
        raise ValueError("input has no channel axis")
    axis = x.ndim - 1 if channels_last else 1
    channels = x.shape[axis]
    if thresholds.shape[0] not in (1, channels):
        raise ValueError("thresholds need 1 row or one per channel")
    xc = np.moveaxis(x, axis, -1)  # channels last
    rows = np.broadcast_to(thresholds, (channels, thresholds.shape[1]))
    count = np.zeros(xc.shape, np.int64)
    for t in range(rows.shape[1]):
        count += xc >= rows[:, t]
    y = count.astype(F32) * F32(out_scale) + F32(out_bias)
    return np.ascontiguousarray(np.moveaxis(y, -1, axis))


def _check_binary(a: np.ndarray, name: str) -> None:
    if not np.all((a == 0) | (a == 1)):
        raise ValueError(f"{name} must hold only 0 and 1")


def xnor_popcount_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Number of positions where the bits of a row of A (..., K) and a column of B (K, N) agree, as float32.

    Equals qonnx's ``(matmul(2A-1, 2B-1) + K) / 2``; computed exactly in integers. Inputs must be 0 or 1.
    """
    a = np.asarray(a, F32)
    b = np.asarray(b, F32)
    if a.ndim < 1 or b.ndim != 2 or a.shape[-1] != b.shape[0]:
        raise ValueError("shapes do not match (A (..., K), B (K, N))")
    _check_binary(a, "A")
    _check_binary(b, "B")
    ai = a.astype(np.int64)
    bi = b.astype(np.int64)
    agree = np.matmul(ai, bi) + np.matmul(1 - ai, 1 - bi)
    return agree.astype(F32)


def conv_output_dim(size: int, kernel: int, stride: int, pad_total: int, dilation: int) -> int:
    """floor((size + pad_total - dilation*(kernel-1) - 1) / stride) + 1."""
    return (size + pad_total - dilation * (kernel - 1) - 1) // stride + 1


def im2col(
    x: np.ndarray,
    kernel_size: Sequence[int],
    stride: Sequence[int],
    pad_amount: Sequence[int] = (0, 0, 0, 0),
    pad_value: int = 0,
    dilations: Sequence[int] = (1, 1),
) -> np.ndarray:
    """Per-sample im2col of an NHWC tensor (decision 8).

    ``out[n, i, j, (a*KW + b)*C + c] = xpad[n, i*sh + a*dh, j*sw + b*dw, c]`` where xpad is x padded with
    ``pad_value`` by pad_amount = [top, left, bottom, right].
    """
    x = np.asarray(x, F32)
    n, h, w, c = x.shape
    kh, kw = kernel_size
    sh, sw = stride
    dh, dw = dilations
    pt, pl, pb, pr = pad_amount
    oh = conv_output_dim(h, kh, sh, pt + pb, dh)
    ow = conv_output_dim(w, kw, sw, pl + pr, dw)
    if oh < 1 or ow < 1:
        raise ValueError("kernel larger than the padded input")
    xpad = np.full((n, h + pt + pb, w + pl + pr, c), F32(pad_value), F32)
    xpad[:, pt : pt + h, pl : pl + w, :] = x
    y = np.empty((n, oh, ow, kh * kw * c), F32)
    for a in range(kh):
        for b in range(kw):
            rows = xpad[:, a * dh : a * dh + (oh - 1) * sh + 1 : sh, b * dw : b * dw + (ow - 1) * sw + 1 : sw, :]
            y[..., (a * kw + b) * c : (a * kw + b + 1) * c] = rows
    return y


def pool_output_dim(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, ceil_mode: bool) -> int:
    """Output length of a pooling window along one axis, as onnxruntime's MaxPool computes it.

    ceil_mode rounds up, then drops a last window that would start in the end padding.
    """
    span = size + pad_begin + pad_end - kernel
    if span < 0:
        raise ValueError("kernel larger than the padded input")
    if not ceil_mode:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= size + pad_begin:
        out -= 1
    return out


def maxpool_nhwc(
    x: np.ndarray,
    kernel_shape: Sequence[int],
    pads: Sequence[int],
    strides: Sequence[int],
    ceil_mode: bool = False,
) -> np.ndarray:
    """Max pooling of an NHWC tensor; padding never wins (as -inf), pads = [top, left, bottom, right].

    Each window is scanned row by row from -inf with ``m = v if (v > m or isnan(v)) else m`` (PyTorch's
    max_pool2d rule): a NaN anywhere in the window gives NaN, and of equal values (-0 and +0) the first wins.
    """
    x = np.asarray(x, F32)
    n, h, w, c = x.shape
    kh, kw = kernel_shape
    sh, sw = strides
    pt, pl, pb, pr = pads
    oh = pool_output_dim(h, kh, sh, pt, pb, ceil_mode)
    ow = pool_output_dim(w, kw, sw, pl, pr, ceil_mode)
    y = np.full((n, oh, ow, c), -np.inf, F32)
    for i in range(oh):
        for j in range(ow):
            m = np.full((n, c), -np.inf, F32)
            for a in range(kh):
                for b in range(kw):
                    r, s = i * sh - pt + a, j * sw - pl + b
                    if 0 <= r < h and 0 <= s < w:
                        v = x[:, r, s, :]
                        m = np.where((v > m) | np.isnan(v), v, m)
            y[:, i, j, :] = m
    return y


def quant_avgpool_shift(ibits: int, obits: int, kernel: int) -> int:
    """Right shift of QuantAvgPool2d: max(0, bit_length((2^ibits - 1) * kernel^2) - obits)."""
    return max(0, ((2**ibits - 1) * kernel * kernel).bit_length() - obits)


def _to_int64_like_x86(r: np.ndarray) -> np.ndarray:
    """float32 -> int64 as numpy's astype does on x86: NaN and out-of-range values give INT64_MIN."""
    r = np.asarray(r, F32)
    ok = np.isfinite(r) & (r >= F32(-(2.0**63))) & (r < F32(2.0**63))
    out = np.where(ok, r, F32(0)).astype(np.int64)
    out[~ok] = INT64_MIN
    return out


def quant_avgpool2d(
    x: np.ndarray,
    kernel: int,
    stride: int,
    ibits: int,
    obits: int,
    data_layout: str = "NCHW",
) -> np.ndarray:
    """QuantAvgPool2d: ``floor_shift(round_half_even(fl(fl(S / k^2) * k^2)), shift)`` as float32.

    S is the float32 sum of the k x k window in row-major order starting from 0; no padding; the shift is
    arithmetic on int64 (:func:`quant_avgpool_shift`).
    """
    x = np.asarray(x, F32)
    if data_layout == "NHWC":
        x = x.transpose(0, 3, 1, 2)
    n, c, h, w = x.shape
    oh = (h - kernel) // stride + 1
    ow = (w - kernel) // stride + 1
    if h < kernel or w < kernel:
        raise ValueError("kernel larger than the input")
    s = np.zeros((n, c, oh, ow), F32)
    for a in range(kernel):
        for b in range(kernel):
            s = s + x[:, :, a : a + (oh - 1) * stride + 1 : stride, b : b + (ow - 1) * stride + 1 : stride]
    kk = F32(kernel * kernel)
    v = np.round((s / kk) * kk)
    q = _to_int64_like_x86(v) >> quant_avgpool_shift(ibits, obits, kernel)
    y = q.astype(F32)
    if data_layout == "NHWC":
        y = np.ascontiguousarray(y.transpose(0, 2, 3, 1))
    return y


def debug_marker(x: np.ndarray) -> np.ndarray:
    """DebugMarker is the identity."""
    return np.array(x, F32, copy=True)
