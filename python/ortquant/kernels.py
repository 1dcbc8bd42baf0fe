"""Kernel-level access to ortquant's native math on numpy arrays, without building a graph.

These call the same C++ core as the onnxruntime ops. ``active_isa()`` tells which CPU path runs;
``set_isa("scalar")`` forces the scalar reference path in this process (``set_isa("")`` undoes it).
"""

from __future__ import annotations

import numpy as np

from ortquant import _C

detected_isa = _C.detected_isa
active_isa = _C.active_isa

# The kernel paths, from the least to the most capable ("avxvnni": the avx2 path with the AVX-VNNI GEMM kernel).
ISAS = ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni")


def supported_isas() -> list[str]:
    """The kernel paths :func:`set_isa` accepts here, scalar first: those this CPU has (plus, in a test build that
    emulates the instruction sets the CPU lacks, the emulated ones)."""
    available = getattr(_C, "available_isas", None)
    if available is not None:
        return list(available())
    return [i for i in ISAS if i != "avxvnni" and ISAS.index(i) <= ISAS.index(detected_isa())]


available_isas = supported_isas


def set_isa(name: str) -> None:
    """Run the kernels on path ``name`` (one of :func:`supported_isas`) in this process; ``""`` restores the
    automatic choice (the best path the CPU has, lowered by ``ORTQUANT_ISA`` in the environment).

    Raises ``ValueError`` for an unknown name and for a path this CPU lacks (e.g. ``"avx512"`` on an AVX2-only
    CPU), instead of running another path than the one asked for.
    """
    if name:
        key = name.lower()
        if key not in ISAS:
            raise ValueError(f"unknown ISA {name!r}; one of: {', '.join(ISAS)} (or '' for the automatic choice)")
        if key not in supported_isas():
            raise ValueError(
                f"this CPU cannot run the {key} path (it supports: {', '.join(supported_isas())}); "
                "pick one of those, or '' for the best one"
            )
    _C.set_isa(name)


def _float(a: np.ndarray | float) -> np.ndarray:
    """A float operand as the kernels take it: float16 arrays as they are, anything else as float32."""
    arr = np.asarray(a)
    return arr if arr.dtype == np.float16 else np.asarray(arr, dtype=np.float32)


def quant(
    x: np.ndarray,
    scale: np.ndarray | float,
    zeropt: np.ndarray | float,
    bitwidth: np.ndarray | float | int,
    signed: bool = True,
    narrow: bool = False,
    rounding_mode: str = "ROUND",
) -> np.ndarray:
    """QONNX Quant/IntQuant: ``(clamp_round(x / scale + zeropt) - zeropt) * scale``, float32 output.

    Parameters broadcast like numpy. ``x``, ``scale``, ``zeropt`` are float16 arrays (kept) or anything else
    (taken as float32); each step runs in numpy's promoted dtype (docs/ops.md). ``bitwidth`` is one float32,
    int32 or float16 value.
    """
    b = np.asarray(bitwidth)
    if b.dtype.kind in "iu":
        b = b.astype(np.int32)
    elif b.dtype != np.float16:
        b = b.astype(np.float32)
    return _C.quant(_float(x), _float(scale), _float(zeropt), b, signed, narrow, rounding_mode)


def round(x: np.ndarray, mode: str, ngraph: bool = False) -> np.ndarray:  # noqa: A001 - mirrors the op
    """Round float32 values with a QONNX rounding-mode name (or an nGraph one with ``ngraph=True``)."""
    return _C.round(np.asarray(x, dtype=np.float32), mode, ngraph)


def multithreshold(
    x: np.ndarray,
    thresholds: np.ndarray,
    out_scale: float = 1.0,
    out_bias: float = 0.0,
    data_layout: str = "NCHW",
    chunk: int = 0,
) -> np.ndarray:
    """QONNX MultiThreshold in float32: ``out_scale * count(x >= thresholds[c]) + out_bias``.

    The channel axis follows qonnx main: last axis if ``data_layout`` ends in ``"C"``, else axis 1.
    ``thresholds`` has shape (channels or 1, number of thresholds). ``chunk > 0`` computes the output in
    pieces of that many elements (as parallel tasks would split it; for tests).
    """
    return _C.multithreshold(
        np.asarray(x, dtype=np.float32),
        np.asarray(thresholds, dtype=np.float32),
        float(out_scale),
        float(out_bias),
        data_layout,
        int(chunk),
    )


def xnor_popcount_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """QONNX XnorPopcountMatMul in float32: for A (..., K) and B (K, N) holding 0/1, the number of agreeing bits.

    Equals qonnx's ``(matmul(2A - 1, 2B - 1) + K) / 2``; any value other than 0 or 1 raises.
    """
    return _C.xnor_popcount_matmul(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))


def _bitwidth_array(b: np.ndarray | float | int) -> np.ndarray:
    """A bit-width tensor as the kernels take it: int32 for integer input, float16 kept, float32 otherwise."""
    a = np.asarray(b)
    return a.astype(np.int32) if a.dtype.kind in "iu" else _float(a)


def bipolar_quant(x: np.ndarray, scale: np.ndarray | float) -> np.ndarray:
    """QONNX BipolarQuant: ``(x >= 0 ? 1 : -1) * scale``, numpy broadcasting.

    float16 arrays are kept, anything else is float32; the output is float16 when both inputs are.
    """
    return _C.bipolar_quant(_float(x), _float(scale))


def trunc(
    x: np.ndarray,
    scale: np.ndarray | float,
    zeropt: np.ndarray | float,
    in_bitwidth: np.ndarray | float | int,
    out_bitwidth: np.ndarray | float | int,
    out_scale: np.ndarray | float | None = None,
    signed: bool = True,
    narrow: bool = False,
    rounding_mode: str = "FLOOR",
) -> np.ndarray:
    """QONNX Trunc: v1 when ``out_scale`` is None, else v2 (which ignores ``in_bitwidth``).

    Every parameter broadcasts like numpy; bit widths are float32, float16 or int32 (integer input becomes
    int32). float16 arrays are kept, other floats become float32: a float16 ``scale`` selects the float16
    pipeline (every float input float16, float16 output), a float32 one the float32 formula (docs/ops.md).
    """
    if out_scale is None:
        return _C.trunc(
            _float(x),
            _float(scale),
            _float(zeropt),
            _bitwidth_array(in_bitwidth),
            _bitwidth_array(out_bitwidth),
            None,
            signed,
            narrow,
            rounding_mode,
        )
    return _C.trunc(
        _float(x),
        _float(scale),
        _float(zeropt),
        _bitwidth_array(in_bitwidth),
        _float(out_scale),
        _bitwidth_array(out_bitwidth),
        signed,
        narrow,
        rounding_mode,
    )


def float_quant(
    x: np.ndarray,
    scale: np.ndarray | float,
    exponent_bitwidth: np.ndarray | float,
    mantissa_bitwidth: np.ndarray | float,
    exponent_bias: np.ndarray | float,
    max_val: np.ndarray | float,
    rounding_mode: str = "ROUND",
    has_inf: bool = False,
    has_nan: bool = False,
    saturation: bool = True,
) -> np.ndarray:
    """QONNX FloatQuant (minifloat quantize-dequantize) with an exact exponent (decision 7), float32 output.

    ``scale`` and ``max_val`` broadcast like numpy; the three format parameters are one integer value each.
    float16 arrays are kept, other floats become float32: a float16 ``scale`` selects the float16 pipeline
    (every input float16), a float32 one the float32 formula (docs/ops.md).
    """
    return _C.float_quant(
        _float(x),
        _float(scale),
        _float(exponent_bitwidth),
        _float(mantissa_bitwidth),
        _float(exponent_bias),
        _float(max_val),
        rounding_mode,
        has_inf,
        has_nan,
        saturation,
    )


def maxpool_nhwc(
    x: np.ndarray,
    kernel_shape: tuple[int, int] | list[int],
    pads: tuple[int, int, int, int] | list[int],
    strides: tuple[int, int] | list[int],
    ceil_mode: bool = False,
) -> np.ndarray:
    """QONNX MaxPoolNHWC on a float32 (N, H, W, C) array; pads are [top, left, bottom, right].

    Padding never wins; a NaN in a window gives NaN; of equal values (-0, +0) the first in row-major order wins.
    """
    return _C.maxpool_nhwc(
        np.asarray(x, dtype=np.float32), list(kernel_shape), list(pads), list(strides), bool(ceil_mode)
    )


def quant_avgpool2d(
    x: np.ndarray, kernel: int, stride: int, ibits: int, obits: int, data_layout: str = "NCHW"
) -> np.ndarray:
    """QONNX QuantAvgPool2d on a float32 4-D array (``"NCHW"`` or ``"NHWC"``), square kernel, no padding.

    ``int64(round_half_even(window_sum / k^2 * k^2)) >> max(0, bit_length((2^ibits - 1) * k^2) - obits)``.
    """
    return _C.quant_avgpool2d(
        np.asarray(x, dtype=np.float32), int(kernel), int(stride), int(ibits), int(obits), data_layout
    )


def ngraph_quantize(
    x: np.ndarray,
    scale: np.ndarray | float,
    zero_point: np.ndarray | int,
    axes: list[int] | tuple[int, ...] = (),
    round_mode: str = "ROUND_NEAREST_TOWARD_EVEN",
) -> np.ndarray:
    """nGraph Quantize: ``saturate(round(x / scale) + zero_point)``, output dtype = ``zero_point``'s dtype.

    ``x`` is float32 or float16 and ``scale`` takes its dtype; ``zero_point`` must be a numpy int8, uint8,
    int16, uint16 or int32 value or array (its dtype picks the output type, so a plain Python int is refused).
    With ``axes``, scale and zero_point have the input's dims at those axes.
    """
    xa = np.ascontiguousarray(x)
    if xa.dtype not in (np.float32, np.float16):
        xa = xa.astype(np.float32)
    zp = np.asarray(zero_point)
    if zp.dtype not in (np.int8, np.uint8, np.int16, np.uint16, np.int32):
        raise ValueError(f"zero_point must be int8, uint8, int16, uint16 or int32 (the output type), got {zp.dtype}")
    return _C.ngraph_quantize(
        xa,
        np.ascontiguousarray(scale, dtype=xa.dtype),
        np.ascontiguousarray(zp),
        list(axes),
        round_mode,
    )


def ngraph_dequantize(
    q: np.ndarray,
    scale: np.ndarray | float,
    zero_point: np.ndarray | int,
    axes: list[int] | tuple[int, ...] = (),
) -> np.ndarray:
    """nGraph Dequantize: ``REAL(q - zero_point) * scale`` with the difference in int64; output dtype = scale's.

    ``q`` is int8, uint8, int16, uint16 or int32 and ``zero_point`` takes its dtype; ``scale`` is float32 or
    float16 (a Python float becomes float32).
    """
    qa = np.ascontiguousarray(q)
    sc = np.asarray(scale)
    if sc.dtype not in (np.float32, np.float16):
        sc = sc.astype(np.float32)
    return _C.ngraph_dequantize(
        qa,
        np.ascontiguousarray(sc),
        np.ascontiguousarray(zero_point, dtype=qa.dtype),
        list(axes),
    )


def _rnn_args(
    scales: dict[str, float | int | None],
) -> tuple[float, float, float, float, float | None, int, int]:
    o_bits = scales.get("o_bits")
    return (
        float(scales["scale_i"]),  # type: ignore[arg-type]
        float(scales["scale_h"]),  # type: ignore[arg-type]
        float(scales["scale_iw"]),  # type: ignore[arg-type]
        float(scales["scale_hw"]),  # type: ignore[arg-type]
        float(scales["scale_o"]) if o_bits is not None else None,  # type: ignore[arg-type]
        int(o_bits) if o_bits is not None else 8,
        int(scales.get("data_bits") or 8),
    )


def lstm_int(
    x: np.ndarray,
    w_ih: np.ndarray,
    w_hh: np.ndarray,
    b_ih: np.ndarray | None,
    b_hh: np.ndarray | None,
    *,
    lengths: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    c0: np.ndarray | None = None,
    batch_first: bool = False,
    go_forward: bool = True,
    **scales: float | int | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """linger LSTMInt: int8 x [T,B,D] ([B,T,D] with batch_first) -> (output, hidden [1,B,H], cell [1,B,H]).

    ``scales``: scale_i, scale_h, scale_iw, scale_hw, and scale_o + o_bits for int8 output (float32 without);
    optional data_bits. Same C++ core as the LSTMInt op.
    """
    return _C.lstm_int(x, w_ih, w_hh, b_ih, b_hh, lengths, h0, c0, batch_first, go_forward, *_rnn_args(scales))


def gru_int(
    x: np.ndarray,
    w_ih: np.ndarray,
    w_hh: np.ndarray,
    b_ih: np.ndarray | None,
    b_hh: np.ndarray | None,
    *,
    lengths: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    batch_first: bool = False,
    go_forward: bool = True,
    **scales: float | int | None,
) -> tuple[np.ndarray, np.ndarray]:
    """linger GRUInt: like :func:`lstm_int` without the cell; returns (output, hidden [1,B,H])."""
    return _C.gru_int(x, w_ih, w_hh, b_ih, b_hh, lengths, h0, None, batch_first, go_forward, *_rnn_args(scales))


def _act_args(act: dict[str, object]) -> dict[str, object]:
    return {
        "scale": float(act.get("scale", 1.0)),  # type: ignore[arg-type]
        "zeropt": float(act.get("zeropt", 0.0)),  # type: ignore[arg-type]
        "bits": int(act.get("bits", 8)),  # type: ignore[call-overload]
        "signed": bool(act.get("signed", True)),
        "narrow": bool(act.get("narrow", False)),
        "rounding_mode": str(act.get("rounding_mode", "ROUND")),
        "bipolar": bool(act.get("bipolar", False)),
    }


def integer_codes(x: np.ndarray, **act: object) -> tuple[np.ndarray, int]:
    """Integer mode's in-kernel activation quantizer: the stored int8 codes ``(q - zeropt) - offset`` and offset.

    ``act``: scale, zeropt, bits, signed, narrow, rounding_mode (QONNX Quant's), bipolar (BipolarQuant). Raises
    for a quantizer of 9 to 24 bits whose codes do not fit int8 (the layers take those on byte planes, not as
    int8 codes).
    """
    return _C.integer_codes(np.asarray(x, dtype=np.float32), **_act_args(act))


def rescale_codes(
    acc: np.ndarray,
    corr: np.ndarray,
    s: np.ndarray,
    b: np.ndarray,
    bound: np.ndarray,
    width: int | None = None,
    relu: bool = False,
    leaky: float | None = None,
    resid: np.ndarray | None = None,
    nonneg: bool = False,
    **act: object,
) -> tuple[np.ndarray, int]:
    """Integer mode's codes epilogue: the int8 codes of rescaled int32 sums, and the quantizer's offset.

    ``acc`` [channels, rows, stride] int32 (the first ``width`` columns are read; all by default), ``corr``, ``s``,
    ``b`` and ``bound`` one value per channel: the codes of ``y = float32(float64(acc + corr) * s + b)`` (after a
    LeakyRelu of slope ``leaky``, the float32 residual ``resid`` [channels, rows, width] added, then a Relu) under the
    quantizer ``act`` (as :func:`integer_codes`; ``nonneg``: its
    non-negative code form, as a layer's input quantizer stores it), as ``[channels, rows, width]``. Every ``|acc|`` of
    channel j must be at most ``bound[j]`` (an error otherwise). The SIMD paths compute most codes in float32 and
    the rest with the exact formula; the result is the same on every path.
    """
    acc = np.asarray(acc, dtype=np.int32)
    args = _act_args(act)
    del args["bipolar"]
    return _C.rescale_codes(
        acc, acc.shape[-1] if width is None else width, np.asarray(corr, dtype=np.int64),
        np.asarray(s, dtype=np.float64), np.asarray(b, dtype=np.float64), np.asarray(bound, dtype=np.int64), relu,
        leaky, None if resid is None else np.asarray(resid, dtype=np.float32), nonneg=nonneg, **args,
    )  # fmt: skip


def rescale_codes_rows(
    acc: np.ndarray,
    corr: np.ndarray,
    s: np.ndarray,
    b: np.ndarray,
    bound: np.ndarray,
    relu: bool = False,
    nonneg: bool = False,
    fast: bool = True,
    **act: object,
) -> tuple[np.ndarray, int, bool]:
    """Integer mode's codes epilogue of a dense layer: :func:`rescale_codes` for sums laid out ``[rows, channels]``.

    Returns ``(codes [rows, channels], the quantizer's offset, vector)``: ``vector`` says whether the layer's
    coefficients let the SIMD loop run (else every code takes the exact formula); ``fast=False`` forces the exact
    formula. The codes are the same either way and on every path.
    """
    acc = np.asarray(acc, dtype=np.int32)
    args = _act_args(act)
    del args["bipolar"]
    return _C.rescale_codes_rows(
        acc, np.asarray(corr, dtype=np.int64), np.asarray(s, dtype=np.float64), np.asarray(b, dtype=np.float64),
        np.asarray(bound, dtype=np.int64), relu, nonneg=nonneg, fast=fast, **args,
    )  # fmt: skip


def qgemm(
    x: np.ndarray,
    w: np.ndarray,
    s: np.ndarray,
    b: np.ndarray,
    kernel: str = "auto",
    relu: bool = False,
    w_shift: np.ndarray | None = None,
    **act: object,
) -> np.ndarray:
    """ortquant.integer::QGemm on x [rows, K] float32 with weight codes w [N, K] int8, S and B [N] float64.

    ``kernel``: "auto" (the layer's own choice), an engine kernel ("scalar", "avx2", "avxvnni", "avx512vnni":
    forces the int8 engine), "xnor" or "bitserial" (a binary-weight layer's bit kernel: XNOR-popcount for a
    bipolar activation, bit-serial for activation codes in [0, 3]; an error for a layer that does not take it).
    ``w_shift`` ([N] integers, optional): the weight codes are ``w[j] + w_shift[j]`` (QGemm's attribute).
    """
    return _C.qgemm(
        np.asarray(x, dtype=np.float32), np.asarray(w, dtype=np.int8), np.asarray(s, dtype=np.float64),
        np.asarray(b, dtype=np.float64), kernel=kernel, relu=relu, w_shift=_shift_arg(w_shift), **_act_args(act),
    )  # fmt: skip


def _shift_arg(w_shift: np.ndarray | None) -> list[int]:
    return [] if w_shift is None else [int(v) for v in np.asarray(w_shift).reshape(-1)]


def qconv(
    x: np.ndarray,
    w: np.ndarray,
    s: np.ndarray,
    b: np.ndarray,
    strides: tuple[int, int] = (1, 1),
    pads: tuple[int, int, int, int] = (0, 0, 0, 0),
    dilations: tuple[int, int] = (1, 1),
    group: int = 1,
    kernel: str = "auto",
    relu: bool = False,
    w_shift: np.ndarray | None = None,
    **act: object,
) -> np.ndarray:
    """ortquant.integer::QConv on x [N, C, H, W] float32, weight codes w [M, C/group, kH, kW], S and B [M].

    ``kernel`` as for :func:`qgemm`. ``w_shift`` ([M] integers, optional): the weight codes are ``w[j] + w_shift[j]``
    (QConv's attribute of that name).
    """
    return _C.qconv(
        np.asarray(x, dtype=np.float32), np.asarray(w, dtype=np.int8), np.asarray(s, dtype=np.float64),
        np.asarray(b, dtype=np.float64), strides=list(strides), pads=list(pads), dilations=list(dilations),
        group=group, kernel=kernel, relu=relu, w_shift=_shift_arg(w_shift), **_act_args(act),
    )  # fmt: skip
