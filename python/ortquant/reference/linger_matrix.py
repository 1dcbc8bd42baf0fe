"""numpy reference of the linger matrix ops (shared/specs/linger.md section 3, decision 11), written from the spec.

Every sum is exact in int64. With ``o_bits`` the output is
``saturate(floor((acc + bias) * (scale_o / (scale_a * scale_b)) + 0.5), o_bits)`` computed in float64 (the ratio
formed in float64), stored as int8 (o_bits <= 8), int16 (<= 16) or int32. Without ``o_bits`` it is
``float32((acc + bias) / (scale_a * scale_b))``. For the power-of-two scales linger writes both are exact, i.e. the
luna rounding shift of thinker.
"""

from __future__ import annotations

import numpy as np


def out_dtype(o_bits: int | None) -> np.dtype:
    """The output dtype of a matrix op: int8/int16/int32 by ``o_bits``, float32 without it."""
    if o_bits is None:
        return np.dtype(np.float32)
    if o_bits <= 8:
        return np.dtype(np.int8)
    if o_bits <= 16:
        return np.dtype(np.int16)
    return np.dtype(np.int32)


def requant(
    acc: np.ndarray,
    scale_a: float,
    scale_b: float,
    scale_o: float | None = None,
    o_bits: int | None = None,
) -> np.ndarray:
    """The output of a matrix op from its exact int64 sums ``acc`` (bias already added)."""
    v = np.asarray(acc, dtype=np.int64).astype(np.float64)
    denom = np.float64(scale_a) * np.float64(scale_b)
    if o_bits is None:
        return (v / denom).astype(np.float32)
    assert scale_o is not None
    ratio = np.float64(scale_o) / denom
    q = np.floor(v * ratio + 0.5)
    lo, hi = -(2.0 ** (o_bits - 1)), 2.0 ** (o_bits - 1) - 1
    return np.clip(q, lo, hi).astype(out_dtype(o_bits))


def _with_bias(acc: np.ndarray, bias: np.ndarray | None, axis: int) -> np.ndarray:
    if bias is None:
        return acc
    shape = [1] * acc.ndim
    shape[axis] = -1
    return acc + np.asarray(bias, dtype=np.int64).reshape(shape)


def linear_acc(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    """Exact ``x . W^T + b`` in int64; x [..., K], W [N, K] (torch layout), b [N]."""
    acc = np.asarray(x, np.int64) @ np.asarray(w, np.int64).T
    return _with_bias(acc, bias, -1)


def linear(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    scale_x: float,
    scale_w: float,
    scale_o: float | None = None,
    o_bits: int | None = None,
) -> np.ndarray:
    """LinearInt."""
    return requant(linear_acc(x, w, bias), scale_x, scale_w, scale_o, o_bits)


def bmm(
    x: np.ndarray,
    y: np.ndarray,
    scale_x: float,
    scale_y: float,
    scale_o: float | None = None,
    o_bits: int | None = None,
) -> np.ndarray:
    """BmmInt: x [..., N, M] @ y [..., M, P] (same leading dims)."""
    acc = np.matmul(np.asarray(x, np.int64), np.asarray(y, np.int64))
    return requant(acc, scale_x, scale_y, scale_o, o_bits)


def _pair(v: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    return int(v[0]), int(v[1])


def conv2d_acc(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilations: tuple[int, int] = (1, 1),
    group: int = 1,
) -> np.ndarray:
    """Exact int64 cross-correlation with zero padding (NCHW); w [M, C/group, kh, kw], pads [t, l, b, r]."""
    x = np.asarray(x, np.int64)
    w = np.asarray(w, np.int64)
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    sh, sw = _pair(strides)
    dh, dw = _pair(dilations)
    pt, pl, pb, pr = pads
    assert c == cg * group and m % group == 0
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr), np.int64)
    xp[:, :, pt : pt + h, pl : pl + wd] = x
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    mg = m // group
    out = np.zeros((n, m, oh, ow), np.int64)
    for g in range(group):
        xg = xp[:, g * cg : (g + 1) * cg]
        wg = w[g * mg : (g + 1) * mg]
        for i in range(kh):
            for j in range(kw):
                patch = xg[:, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw]
                out[:, g * mg : (g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, wg[:, :, i, j])
    return _with_bias(out, bias, 1)


def conv2d(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    scale_x: float,
    scale_w: float,
    scale_o: float | None = None,
    o_bits: int | None = None,
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilations: tuple[int, int] = (1, 1),
    group: int = 1,
) -> np.ndarray:
    """Conv2dInt."""
    acc = conv2d_acc(x, w, bias, strides, pads, dilations, group)
    return requant(acc, scale_x, scale_w, scale_o, o_bits)


def conv1d(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    scale_x: float,
    scale_w: float,
    scale_o: float | None = None,
    o_bits: int | None = None,
    stride: int = 1,
    pads: tuple[int, int] = (0, 0),
    dilation: int = 1,
    group: int = 1,
) -> np.ndarray:
    """Conv1dInt: x [N, C, L], w [M, C/group, k] (a Conv2dInt on one row)."""
    acc = conv2d_acc(
        np.asarray(x)[:, :, None, :],
        np.asarray(w)[:, :, None, :],
        bias,
        (1, stride),
        (0, pads[0], 0, pads[1]),
        (1, dilation),
        group,
    )
    return requant(acc[:, :, 0, :], scale_x, scale_w, scale_o, o_bits)


def conv_transpose2d_acc(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None = None,
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilations: tuple[int, int] = (1, 1),
    output_padding: tuple[int, int] = (0, 0),
    group: int = 1,
) -> np.ndarray:
    """Exact int64 transposed convolution (torch semantics); w [C, M/group, kh, kw], pads [t, l, b, r].

    Input pixel (ih, iw) and tap (i, j) add into output pixel (ih*sh - pt + i*dh, iw*sw - pl + j*dw).
    """
    x = np.asarray(x, np.int64)
    w = np.asarray(w, np.int64)
    n, c, h, wd = x.shape
    c2, mg, kh, kw = w.shape
    assert c == c2 and c % group == 0
    sh, sw = _pair(strides)
    dh, dw = _pair(dilations)
    pt, pl, pb, pr = pads
    oph, opw = output_padding
    oh = (h - 1) * sh + dh * (kh - 1) + 1 + oph - pt - pb
    ow = (wd - 1) * sw + dw * (kw - 1) + 1 + opw - pl - pr
    cg = c // group
    # Full (uncropped) output, then crop the pads.
    fh = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    fw = (wd - 1) * sw + dw * (kw - 1) + 1 + opw
    full = np.zeros((n, mg * group, max(fh, pt + oh), max(fw, pl + ow)), np.int64)
    for g in range(group):
        xg = x[:, g * cg : (g + 1) * cg]
        wg = w[g * cg : (g + 1) * cg]
        for i in range(kh):
            for j in range(kw):
                contrib = np.einsum("nchw,cm->nmhw", xg, wg[:, :, i, j])
                full[:, g * mg : (g + 1) * mg, i * dh : i * dh + sh * (h - 1) + 1 : sh,
                     j * dw : j * dw + sw * (wd - 1) + 1 : sw] += contrib  # fmt: skip
    out = full[:, :, pt : pt + oh, pl : pl + ow]
    return _with_bias(out, bias, 1)


def conv_transpose2d(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    scale_x: float,
    scale_w: float,
    scale_o: float | None = None,
    o_bits: int | None = None,
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilations: tuple[int, int] = (1, 1),
    output_padding: tuple[int, int] = (0, 0),
    group: int = 1,
) -> np.ndarray:
    """ConvTranspose2dInt."""
    acc = conv_transpose2d_acc(x, w, bias, strides, pads, dilations, output_padding, group)
    return requant(acc, scale_x, scale_w, scale_o, o_bits)
