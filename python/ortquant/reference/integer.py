"""numpy reference of the integer-mode ops (``ortquant.integer``: QConv, QGemm), from docs/ops.md "Integer mode".

Independent of the C++: the activation codes follow QONNX Quant's formula in numpy float32, the sums are exact
int64 (an explicit sum over kernel taps), and the output is the contract's float64 expression rounded once to
float32: ``float32(float64(acc) * S[j] + B[j])`` (numpy's float64 multiply, then add, then cast).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ortquant.reference.qonnx import int_bounds, round_mode_fn

F32 = np.float32


def act_codes(
    x: np.ndarray,
    scale: float,
    zeropt: float = 0.0,
    bits: int = 8,
    signed: bool = True,
    narrow: bool = False,
    rounding_mode: str = "ROUND",
    bipolar: bool = False,
) -> np.ndarray:
    """Integer values q - zeropt of QONNX Quant (or BipolarQuant when ``bipolar``) on float32 ``x``, as int64.

    NaN inputs give 0 (integer mode's documented choice; Quant would return NaN).
    """
    x = np.asarray(x, dtype=F32)
    s, z = F32(scale), F32(0.0 if bipolar else zeropt)
    q = x / s + z
    if bipolar or (signed and bits == 1):
        return np.where(q >= F32(0), 1, -1).astype(np.int64)
    q = np.where(np.isnan(q), z, q)
    lo, hi = int_bounds(signed, narrow, np.int32(bits))
    q = np.where(q > hi, F32(hi), q)
    q = np.where(q < lo, F32(lo), q)
    q = round_mode_fn(rounding_mode)(q).astype(F32)
    return (q - z).astype(np.int64)


def rescale(acc: np.ndarray, s: np.ndarray, b: np.ndarray, axis: int, relu: bool = False) -> np.ndarray:
    """float32(float64(acc) * S[j] + B[j]) with j along ``axis``; with relu then y < 0 ? 0 : y."""
    shape = [1] * acc.ndim
    shape[axis] = -1
    s64 = np.asarray(s, dtype=np.float64).reshape(shape)
    b64 = np.asarray(b, dtype=np.float64).reshape(shape)
    y = (acc.astype(np.float64) * s64 + b64).astype(F32)
    return np.where(y < F32(0), F32(0), y) if relu else y


def qgemm(x: np.ndarray, w: np.ndarray, s: np.ndarray, b: np.ndarray, relu: bool = False, **act: object) -> np.ndarray:
    """QGemm: x [..., K] float32, w [N, K] integer codes, s and b [N] float64; output [..., N] float32."""
    a = act_codes(x, **act)  # type: ignore[arg-type]
    acc = a.reshape(-1, a.shape[-1]) @ np.asarray(w, dtype=np.int64).T
    return rescale(acc, s, b, 1, relu).reshape(*np.shape(x)[:-1], np.shape(w)[0])


def conv_int(
    a: np.ndarray, w: np.ndarray, strides: Sequence[int], pads: Sequence[int], dilations: Sequence[int], group: int
) -> np.ndarray:
    """Exact integer 2-D convolution (NCHW, zero padding in the integer domain), int64."""
    a = np.asarray(a, dtype=np.int64)
    w = np.asarray(w, dtype=np.int64)
    n, c, h, wd = a.shape
    m, cg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    pt, pl, pb, pr = pads
    ap = np.zeros((n, c, h + pt + pb, wd + pl + pr), dtype=np.int64)
    ap[:, :, pt : pt + h, pl : pl + wd] = a
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, m, oh, ow), dtype=np.int64)
    mg = m // group
    for gi in range(group):
        xs = ap[:, gi * cg : (gi + 1) * cg]
        ws = w[gi * mg : (gi + 1) * mg]
        for i in range(kh):
            for j in range(kw):
                patch = xs[:, :, i * dh : i * dh + sh * (oh - 1) + 1 : sh, j * dw : j * dw + sw * (ow - 1) + 1 : sw]
                out[:, gi * mg : (gi + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, ws[:, :, i, j])
    return out


def qconv(
    x: np.ndarray,
    w: np.ndarray,
    s: np.ndarray,
    b: np.ndarray,
    strides: Sequence[int] = (1, 1),
    pads: Sequence[int] = (0, 0, 0, 0),
    dilations: Sequence[int] = (1, 1),
    group: int = 1,
    relu: bool = False,
    **act: object,
) -> np.ndarray:
    """QConv: x [N, C, H, W] float32, w [M, C/group, kH, kW] codes, s and b [M] float64; NCHW float32 out."""
    a = act_codes(x, **act)  # type: ignore[arg-type]
    return rescale(conv_int(a, w, strides, pads, dilations, group), s, b, 1, relu)


__all__ = ["act_codes", "conv_int", "qconv", "qgemm", "rescale"]
