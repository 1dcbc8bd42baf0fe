"""numpy reference of the linger / thinker ops, written from the specs (linger.md sections 0-2,
linger-extra.md, decisions 11-15), independent of the C++.

Integers are computed in int64, the luna rounding ``floor(v * r + 1/2)`` in float64 (exact for the power-of-two
ratios linger writes; the C++ uses the same float64 formula for any other ratio), and linger's float32 sequences
(Quant, the float-operand forms of iqAdd/iqMul/iqDiv, the output steps of SoftmaxInt/LogSoftmaxInt) in numpy
float32 with the same operation order. Where ortquant deliberately differs from linger the function says so.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

F32 = np.float32
I64 = np.int64
INT32_MIN = -(2**31)

# ---- luna arithmetic -----------------------------------------------------------------------------------------


def int_range(bits: int) -> tuple[int, int]:
    """The range of a signed ``bits``-bit integer."""
    return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1


def container(bits: int) -> type[np.signedinteger]:
    """numpy dtype holding a ``bits``-bit value: int8, int16 or int32."""
    return np.int8 if bits <= 8 else (np.int16 if bits <= 16 else np.int32)


def saturate(v: np.ndarray, bits: int) -> np.ndarray:
    """Clamp to the signed ``bits``-bit range, in the container dtype."""
    lo, hi = int_range(bits)
    return np.clip(np.asarray(v, dtype=np.float64 if np.asarray(v).dtype.kind == "f" else I64), lo, hi).astype(
        container(bits)
    )


def rescale(v: np.ndarray, ratio: float) -> np.ndarray:
    """luna requantization ``floor(v * ratio + 1/2)`` (float64; exact for powers of two), as int64 (saturated)."""
    f = np.floor(np.asarray(v, dtype=np.float64) * float(ratio) + 0.5)
    return np.clip(f, -(2.0**63), 2.0**63 - 1024).astype(I64)


def x86_toint32(f: np.ndarray) -> np.ndarray:
    """float32 -> int32 like x86 cvttss2si (torch ``.int()``): truncation; NaN/inf/out of range -> INT32_MIN."""
    f = np.asarray(f, dtype=F32)
    ok = (f >= F32(-(2.0**31))) & (f < F32(2.0**31))
    out = np.full(f.shape, INT32_MIN, dtype=I64)
    out[ok] = np.trunc(f[ok]).astype(I64)
    return out


def x86_toint64(f: np.ndarray) -> np.ndarray:
    """float32 -> int64 like x86's 64-bit cvttss2si (torch ``.long()``): out of range / NaN -> INT64_MIN."""
    f = np.asarray(f, dtype=F32)
    ok = (f >= F32(-(2.0**63))) & (f < F32(2.0**63))
    out = np.full(f.shape, np.iinfo(np.int64).min, dtype=I64)
    out[ok] = np.trunc(f[ok].astype(np.float64)).astype(I64)
    return out


def float_out(z: np.ndarray, scale_o: float, bits: int = 8) -> np.ndarray:
    """linger's float32 output step: saturate(toint_x86(floor(fl32(fl32(z * so) + 0.5))))."""
    w = (np.asarray(z, dtype=F32) * F32(scale_o)).astype(F32)
    w = (w + F32(0.5)).astype(F32)
    return saturate(x86_toint32(np.floor(w)), bits)


# ---- Quant / Dequant / Requant -------------------------------------------------------------------------------


def quant(x: np.ndarray, scale_x: float, data_bits: int = 8) -> np.ndarray:
    """thinker Quant: clamp(floor(fl32(fl32(x * scale) + 0.5))), NaN -> 0 (ortquant's choice)."""
    t = (np.asarray(x, dtype=F32) * F32(scale_x)).astype(F32)
    t = np.floor((t + F32(0.5)).astype(F32))
    lo, hi = int_range(data_bits)
    t = np.where(np.isnan(t), 0.0, np.clip(t.astype(np.float64), lo, hi))
    return t.astype(container(data_bits))


def dequant(q: np.ndarray, scale_o: float) -> np.ndarray:
    """thinker Dequant: float32(q) / scale_o in float32; a float32 input passes through unchanged."""
    q = np.asarray(q)
    if q.dtype == np.float32:
        return q.copy()
    return (q.astype(F32) / F32(scale_o)).astype(F32)


def requant(x: np.ndarray, scale_x: float, scale_o: float, o_bits: int) -> np.ndarray:
    """thinker Requant: saturate(floor(x * so/sx + 1/2), o_bits)."""
    return saturate(rescale(x, float(scale_o) / float(scale_x)), o_bits)


# ---- elementwise ---------------------------------------------------------------------------------------------


def iqadd(x: np.ndarray, y: np.ndarray, sx: float, sy: float, so: float) -> np.ndarray:
    """thinker iqAdd. int8 y: each operand rounded separately; float32 y: linger's iqAddScalar float32 path."""
    x = np.asarray(x, dtype=np.int8)
    y = np.asarray(y)
    if y.dtype == np.int8:
        a = rescale(x, float(so) / float(sx))
        b = rescale(y, float(so) / float(sy))
        return saturate(a + b, 8)
    xf = (x.astype(F32) / F32(sx)).astype(F32)
    yf = (y.astype(F32) / F32(sy)).astype(F32)
    return float_out((xf + yf).astype(F32), so)


def iqmul(x: np.ndarray, y: np.ndarray, sx: float, sy: float, so: float) -> np.ndarray:
    """thinker iqMul. int8 y: saturate(floor(x*y*so/(sx*sy) + 1/2)); float32 y: float32 path (ortquant extension)."""
    x = np.asarray(x, dtype=np.int8)
    y = np.asarray(y)
    if y.dtype == np.int8:
        return saturate(rescale(x.astype(I64) * y.astype(I64), float(so) / (float(sx) * float(sy))), 8)
    xf = (x.astype(F32) / F32(sx)).astype(F32)
    yf = (y.astype(F32) / F32(sy)).astype(F32)
    return float_out((xf * yf).astype(F32), so)


def iqdiv(x: np.ndarray, y: np.ndarray, sx: float, sy: float, so: float) -> np.ndarray:
    """thinker iqDiv: linger's float32 path for both forms (y int8 tensor or float32 constant); x/0 -> -128."""
    x = np.asarray(x, dtype=np.int8)
    y = np.asarray(y)
    xf = (x.astype(F32) / F32(sx)).astype(F32)
    yf = (y.astype(F32) / F32(sy)).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        z = (xf / yf).astype(F32)
        return float_out(z, so)


def iqdiv_tensor_exact(x: np.ndarray, y: np.ndarray, sx: float, sy: float, so: float) -> np.ndarray:
    """The integer form of iqDiv for int8/int8 (linger-extra.md: equal to the float32 path for power-of-two
    scales): qy == 0 -> -128, else clamp(floor(qx*sy*so / (qy*sx) + 1/2)) as an exact rational."""
    from fractions import Fraction

    x = np.asarray(x, dtype=np.int64)
    y = np.asarray(y, dtype=np.int64)
    xb, yb = np.broadcast_arrays(x, y)
    out = np.empty(xb.shape, dtype=np.int8)
    k = Fraction(float(sy)) * Fraction(float(so)) / Fraction(float(sx))
    for idx in np.ndindex(xb.shape):
        qy = int(yb[idx])
        if qy == 0:
            out[idx] = -128
            continue
        v = Fraction(int(xb[idx])) * k / qy + Fraction(1, 2)
        out[idx] = max(-128, min(127, v.numerator // v.denominator))
    return out


def iqcat(xs: Sequence[np.ndarray], scales: Sequence[float], so: float, dim: int) -> np.ndarray:
    """thinker iqCat: each input requantized to scale_o on its own, then concatenated along dim."""
    return np.concatenate([requant(np.asarray(x, np.int8), s, so, 8) for x, s in zip(xs, scales, strict=True)], dim)


def iqclamp(x: np.ndarray, sx: float, so: float, vmin: float, vmax: float) -> np.ndarray:
    """thinker iqClamp: requant to so, then clamp to [max(-128, ceil(min*so)), min(127, floor(max*so))]."""
    q = rescale(np.asarray(x, np.int8), float(so) / float(sx))
    lo = max(-128, int(np.ceil(float(vmin) * float(so))))
    hi = min(127, int(np.floor(float(vmax) * float(so))))
    return np.clip(q, lo, hi).astype(np.int8)


def relu(x: np.ndarray) -> np.ndarray:
    """Relu as onnxruntime's: x < 0 ? 0 : x (NaN and -0.0 pass through)."""
    x = np.asarray(x)
    return np.where(x < 0, np.zeros((), x.dtype), x).astype(x.dtype)


# ---- sigmoid / tanh (linger.md section 1) ---------------------------------------------------------------------

SIG_BANDS = [0, 971, 1699, 2347, 2974, 3614, 4291, 5026, 5861, 6831, 7864, 8987, 10375, 11594, 13168, 14730, 32768]
SIG_SLOPES = [32316, 29471, 25891, 22068, 18225, 29057, 22206, 16113, 10881, 27353, 16611, 9242, 4618, 20670, 8610, 693]
SIG_BIAS_POS = [16384, 16721, 17464, 18559, 19954, 21585, 23380, 25249, 27121, 28807, 30096, 31107, 31839, 32199,
                32502, 32724]  # fmt: skip
SIG_BIAS_NEG = [16384, 16047, 15304, 14209, 12814, 11183, 9388, 7519, 5647, 3961, 2672, 1661, 929, 569, 266, 44]
TANH_BANDS = [0, 512, 888, 1226, 1558, 1899, 2264, 2670, 3146, 3734, 4297, 4761, 5466, 6151, 7193, 8093, 32768]
TANH_SLOPES = [32266, 29154, 25374, 21309, 17272, 26886, 19904, 13765, 8599, 19497, 12047, 7324, 3373, 26820, 5531,
               337]  # fmt: skip
TANH_BIAS = [0, 778, 2417, 4851, 7922, 11474, 15334, 19335, 23303, 26699, 28653, 30026, 31344, 31981, 32565, 32725]


def _segment(bands: list[int], a: np.ndarray) -> np.ndarray:
    """j in 1..16: the first j with a <= bands[j]; 0 when a is beyond the last band."""
    j = np.searchsorted(np.asarray(bands[1:], dtype=I64), a, side="left") + 1
    return np.where(a > bands[16], 0, j)


def _q15_to_q7(q15: np.ndarray) -> np.ndarray:
    return np.clip(np.floor_divide(q15 + 128, 256), -128, 127)


def sigmoid_q11(v: np.ndarray) -> np.ndarray:
    """SIG(v): the 16-segment sigmoid, Q11 in, Q7 out in [-128, 127]; 0 beyond |v| > 32768 (like lingerext)."""
    v = np.asarray(v, dtype=I64)
    a = np.abs(v)
    j = _segment(SIG_BANDS, a)
    jj = np.maximum(j, 1) - 1
    sh = np.where(j <= 5, 13, np.where(j <= 9, 14, np.where(j <= 13, 16, 19)))
    slope = np.asarray(SIG_SLOPES, I64)[jj]
    bias = np.where(v < 0, np.asarray(SIG_BIAS_NEG, I64)[jj], np.asarray(SIG_BIAS_POS, I64)[jj])
    q15 = np.floor_divide(slope * v, np.left_shift(I64(1), sh)) + bias
    return np.where(j == 0, 0, _q15_to_q7(q15)).astype(I64)


def tanh_q11(v: np.ndarray) -> np.ndarray:
    """TANH(v): the 16-segment tanh, Q11 in, Q7 out; |v| of -32768 is taken as 32767; 0 beyond |v| > 32768."""
    v = np.asarray(v, dtype=I64)
    a = np.where(v < 0, np.where(v == -32768, 32767, -v), v)
    j = _segment(TANH_BANDS, a)
    jj = np.maximum(j, 1) - 1
    sh = np.where(j <= 5, 11, np.where(j <= 9, 12, np.where(j <= 13, 14, 18)))
    slope = np.asarray(TANH_SLOPES, I64)[jj]
    bias = np.asarray(TANH_BIAS, I64)[jj]
    d = np.left_shift(I64(1), sh)
    q15 = np.where(v >= 0, np.floor_divide(slope * a, d) + bias, np.floor_divide(-slope * a, d) - bias)
    return np.where(j == 0, 0, _q15_to_q7(q15)).astype(I64)


def _to_q11(x: np.ndarray, sx: float) -> np.ndarray:
    # ortquant saturates to int16 (decision 12's reasoning): lingerext would return 0 beyond +-32768.
    return np.clip(rescale(x, 2048.0 / float(sx)), -32768, 32767)


def iqsigmoid(x: np.ndarray, sx: float) -> np.ndarray:
    """thinker iqSigmoid: Q11 (saturated to int16), SIG, clamp to [0, 127]; output int8 at scale 128."""
    return np.clip(sigmoid_q11(_to_q11(x, sx)), 0, 127).astype(np.int8)


def iqtanh(x: np.ndarray, sx: float) -> np.ndarray:
    """thinker iqTanh: Q11 (saturated to int16), TANH; output int8 at scale 128."""
    return tanh_q11(_to_q11(x, sx)).astype(np.int8)


# ---- reductions and padding ----------------------------------------------------------------------------------


def iqsum(x: np.ndarray, sx: float, so: float, dims: Sequence[int] | None, keepdims: bool = False) -> np.ndarray:
    """thinker iqSum: exact integer sum over dims (None or empty = all axes), then requant to scale_o."""
    x = np.asarray(x, np.int8)
    axes = None if not dims else tuple(int(d) for d in dims)
    s = np.sum(x.astype(I64), axis=axes, keepdims=keepdims)
    return requant(np.asarray(s), sx, so, 8)


def iqpad(x: np.ndarray, pads: Sequence[int], value: int = 0) -> np.ndarray:
    """thinker iqPad: ONNX Pad, constant mode, pads [b_0..b_{r-1}, e_0..e_{r-1}]; negative pads crop."""
    x = np.asarray(x, np.int8)
    r = x.ndim
    b, e = list(pads[:r]), list(pads[r:])
    crop = tuple(slice(max(0, -bb), x.shape[i] - max(0, -ee)) for i, (bb, ee) in enumerate(zip(b, e, strict=True)))
    x = x[crop]
    widths = [(max(0, bb), max(0, ee)) for bb, ee in zip(b, e, strict=True)]
    return np.pad(x, widths, mode="constant", constant_values=np.int8(value))


# ---- SoftmaxInt / LogSoftmaxInt (linger-extra.md sections 1, 2) ---------------------------------------------------

EXP_C = 774541002  # log2(e) * 2^29
LN2_C = 1488522236  # ln(2) * 2^31
P23 = (57364, 446161, 2008107, 5813551, 8388575)
LOG2_TABLE = [
    -2135405020, 1543054448, -2111388125, 1531138969, -2087555976, 1519406104, -2063905754, 1507851685,
    -2040434703, 1496471672, -2017140127, 1485262146, -1994019392, 1474219305, -1971069924, 1463339458,
    -1948289204, 1452619022, -1925674768, 1442054520, -1903224206, 1431642574, -1880935160, 1421379903,
    -1858805323, 1411263320, -1836832436, 1401289728, -1815014290, 1391456116, -1793348719, 1381759558,
    -1771833605, 1372197208, -1750466872, 1362766299, -1729246487, 1353464140, -1708170460, 1344288112,
    -1687236840, 1335235667, -1666443715, 1326304325, -1645789212, 1317491671, -1625271494, 1308795357,
    -1604888763, 1300213092, -1584639253, 1291742648, -1564521234, 1283381855, -1544533010, 1275128595,
    -1524672916, 1266980808, -1504939321, 1258936486, -1485330622, 1250993669, -1465845250, 1243150448,
    -1446481662, 1235404963, -1427238345, 1227755396, -1408113815, 1220199979, -1389106614, 1212736982,
    -1370215312, 1205364720, -1351438503, 1198081550, -1332774808, 1190885865, -1314222872, 1183776099,
    -1295781365, 1176750721, -1277448980, 1169808239, -1259224434, 1162947194, -1241106464, 1156166160,
    -1223093832, 1149463748, -1205185319, 1142838597, -1187379730, 1136289378, -1169675887, 1129814795,
    -1152072635, 1123413578, -1134568837, 1117084487, -1117163376, 1110826311, -1099855152, 1104637864,
    -1082643085, 1098517986, -1065526114, 1092465546, -1048503192, 1086479433, -1031573292, 1080558564,
    -1014735402, 1074701878, -997988529, 1068908337, -981331693, 1063176925, -964763932, 1057506648,
    -948284297, 1051896533, -931891857, 1046345628, -915585693, 1040853000, -899364902, 1035417736,
    -883228594, 1030038943, -867175895, 1024715744, -851205942, 1019447283, -835317887, 1014232719,
    -819510893, 1009071229, -803784139, 1003962008, -788136812, 998904264, -772568116, 993897226,
    -757077264, 988940132, -741663481, 984032241, -726326004, 979172822, -711064081, 974361162,
    -695876973, 969596560, -680763947, 964878328, -665724287, 960205794, -650757282, 955578296,
    -635862234, 950995187, -621038454, 946455831, -606285264, 941959603, -591601995, 937505894,
    -576987987, 933094101, -562442589, 928723637, -547965161, 924393923, -533555070, 920104392,
    -519211692, 915854487, -504934414, 911643662, -490722627, 907471380, -476575735, 903337114,
    -462493147, 899240347, -448474281, 895180571, -434518564, 891157288, -420625429, 887170007,
    -406794316, 883218247, -393024676, 879301537, -379315963, 875419411, -365667642, 871571413,
    -352079181, 867757096, -338550059, 863976020, -325079760, 860227750, -311667773, 856511864,
    -298313597, 852827942, -285016736, 849175574, -271776698, 845554356, -258593002, 841963892,
    -245465169, 838403791, -232392727, 834873669, -219375212, 831373151, -206412164, 827901864,
    -193503129, 824459445, -180647658, 821045534, -167845309, 817659779, -155095645, 814301834,
    -142398234, 810971356, -129752649, 807668010, -117158469, 804391466, -104615278, 801141400,
    -92122664, 797917491, -79680221, 794719425, -67287549, 791546892, -54944250, 788399588,
    -42649932, 785277214, -30404208, 782179473, -18206696, 779106077, -6057018, 776056738,
]  # fmt: skip


def _sat32(v: np.ndarray) -> np.ndarray:
    return np.clip(v, -(2**31), 2**31 - 1)


def softmax_q25_row(x: np.ndarray) -> np.ndarray:
    """The SOFTMAX kernel on one row: int32 Q25 in, int64 Q15 out (values in [0, 32768])."""
    x = np.asarray(x, dtype=I64)
    d = np.maximum(x - x.max(), -(2**31))
    t = _sat32(np.floor((d * EXP_C).astype(np.float64) * 2.0**-31 + 0.5).astype(I64))
    n = t >> 23
    f = (t & 0x7FFFFF) - 2**23
    y = np.full(x.shape, P23[0], dtype=I64)
    for c in P23[1:]:
        y = ((y * f + 2**22) >> 23) + c
    sh = n + 1
    e = np.where(sh >= 0, y << np.maximum(sh, 0), np.where(-sh >= 63, 0, y >> np.minimum(-sh, 62)))
    total = 0
    for v in e.tolist():  # saturating int32 accumulation, left to right
        total = max(-(2**31), min(2**31 - 1, total + v))
    lg = total.bit_length() - 1
    xn = total >> (lg - 22)
    r = 12275712 - xn
    for _ in range(2):
        g = (r * xn + 2**22) >> 23
        r = r + ((2 * (2**22 - g) * r + 2**22) >> 23)
    rcp = r >> (lg - 23)
    return (e * rcp + 2**30) >> 31


def logn_q15(v: np.ndarray) -> np.ndarray:
    """The LOGN kernel: int32 Q15 in, ln(v / 2^15) in Q25 out; v <= 0 -> -2^31."""
    v = np.asarray(v, dtype=I64)
    out = np.full(v.shape, -(2**31), dtype=I64)
    for idx in np.ndindex(v.shape):
        x = int(v[idx])
        if x <= 0:
            continue
        k = 30 - (x.bit_length() - 1)
        m = (x << k) - 2**30
        j = m >> 23
        u = 4 * (m & 0x7FFFFF) - 2**24
        acc = LOG2_TABLE[2 * j] * 2**32 + 2 * LOG2_TABLE[2 * j + 1] * u
        l2 = (16 - k) * 2**25 + (acc >> 38)
        p = float(l2 * LN2_C) * 2.0**-31
        rr = np.floor(abs(p) + 0.5) * np.sign(p)  # C round(): half away from zero (p is exact here)
        out[idx] = max(-(2**31), min(2**31 - 1, int(rr)))
    return out


def _to_q25(x: np.ndarray, sx: float, log: bool) -> np.ndarray:
    qx = int(np.trunc(np.log2(float(sx))))
    lsh = 25 - qx
    p = F32(np.ldexp(np.float64(1.0), lsh)) if lsh < 128 else F32(np.inf)
    with np.errstate(over="ignore", invalid="ignore"):
        t = (np.asarray(x).astype(F32) * p).astype(F32)
        if lsh <= 0:
            t = np.floor((t + F32(0.5)).astype(F32))
    if log:
        return x86_toint32(t)
    return _sat32(x86_toint64(t))


def softmax_int(
    x: np.ndarray,
    sx: float,
    dim: int,
    so: float | None = None,
    o_bits: int | None = None,
    log: bool = False,
) -> np.ndarray:
    """thinker SoftmaxInt (log=False) / LogSoftmaxInt (log=True), rows along dim. Without o_bits: float32."""
    x = np.asarray(x)
    xm = np.moveaxis(x, dim, -1)
    rows = xm.reshape(-1, xm.shape[-1]) if xm.size else xm.reshape(0, xm.shape[-1])
    xq = _to_q25(rows, sx, log)
    outs = []
    for r in xq:
        p15 = softmax_q25_row(r)
        if not log:
            p15 = np.minimum(p15, 32767)
            if o_bits is None:
                outs.append((p15.astype(F32) / F32(32768.0)).astype(F32))
            else:
                w = (p15.astype(F32) * F32(so)).astype(F32)
                w = (w / F32(32768.0)).astype(F32)
                outs.append(np.clip(x86_toint32(np.floor((w + F32(0.5)).astype(F32))), -128, 127))
        else:
            q25 = np.minimum(logn_q15(p15), 0)
            fq = (q25.astype(F32) / F32(2.0**25)).astype(F32)
            if o_bits is None:
                outs.append(fq)
            else:
                w = np.floor(((fq * F32(so)).astype(F32) + F32(0.5)).astype(F32)).astype(np.float64)
                lo, hi = int_range(o_bits)
                outs.append(np.clip(w, lo, hi))
    dtype = F32 if o_bits is None else container(o_bits)
    y = np.array(outs).astype(dtype).reshape(xm.shape) if outs else np.zeros(xm.shape, dtype)
    return np.moveaxis(y, -1, dim)


# ---- pooling and normalization -------------------------------------------------------------------------------


def pool_out_size(n: int, k: int, s: int, pb: int, pe: int, ceil_mode: bool) -> int:
    """torch's pooling output size (with the ceil_mode rule that the last window starts inside)."""
    span = n + pb + pe - k
    out = (-(-span // s) if ceil_mode else span // s) + 1
    if ceil_mode and (out - 1) * s >= n + pb:
        out -= 1
    return out


def avgpool2d(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int], ceil_mode: bool, bits: int = 8
) -> np.ndarray:
    """thinker AvgPool2dInt (pads: top, left, bottom, right), linger's double sequence:
    floor(rint(S / d * K) / K + 0.5) with d torch's count_include_pad divisor (window clipped to the padded input)."""
    x = np.asarray(x, np.int8)
    n, c, h, w = x.shape
    kh, kw = kernel
    sh, sw = strides
    pt, pl, pb, pr = pads
    out_h = pool_out_size(h, kh, sh, pt, pb, ceil_mode)
    out_w = pool_out_size(w, kw, sw, pl, pr, ceil_mode)
    area = float(kh * kw)
    y = np.empty((n, c, out_h, out_w), np.int64)
    xs = x.astype(I64)
    for oh in range(out_h):
        h0 = oh * sh - pt
        h1 = min(h0 + kh, h + pb)
        dh = h1 - h0
        h0, h1 = max(h0, 0), min(h1, h)
        for ow in range(out_w):
            w0 = ow * sw - pl
            w1 = min(w0 + kw, w + pr)
            d = dh * (w1 - w0)
            w0, w1 = max(w0, 0), min(w1, w)
            window_sum = xs[:, :, h0:h1, w0:w1].sum(axis=(2, 3))
            avg = window_sum.astype(np.float64) / float(d)
            y[:, :, oh, ow] = np.floor(np.rint(avg * area) / area + 0.5)
    return saturate(y, bits)


def batchnorm_int(
    x: np.ndarray, w: np.ndarray, b: np.ndarray, sx: float, sw: float, so: float, o_bits: int = 8
) -> np.ndarray:
    """thinker BatchNorm2dInt/1dInt, linger 1.1.1 layout: saturate(floor((x*w[c] + b[c]) * so/(sx*sw) + 1/2))."""
    x = np.asarray(x, np.int8)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    acc = x.astype(I64) * np.asarray(w, I64).reshape(shape) + np.asarray(b, I64).reshape(shape)
    return saturate(rescale(acc, float(so) / (float(sx) * float(sw))), o_bits)


def batchnorm_int_old(
    x: np.ndarray,
    mul_w: np.ndarray,
    add_b: np.ndarray,
    smx: float,
    smw: float,
    smo: float,
    sab: float,
    sao: float,
    o_bits: int = 8,
) -> np.ndarray:
    """The seed's older BatchNorm layout (decision 15): m = sat(x*mul_w at smx*smw -> smo);
    o = sat(rq(m -> sao) + rq(add_b, sab -> sao))."""
    x = np.asarray(x, np.int8)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    m = saturate(rescale(x.astype(I64) * np.asarray(mul_w, I64).reshape(shape), smo / (smx * smw)), o_bits)
    bo = rescale(np.asarray(add_b, I64).reshape(shape), sao / sab)
    return saturate(rescale(m, sao / smo) + bo, o_bits)


__all__ = [
    "avgpool2d",
    "batchnorm_int",
    "batchnorm_int_old",
    "dequant",
    "float_out",
    "iqadd",
    "iqcat",
    "iqclamp",
    "iqdiv",
    "iqdiv_tensor_exact",
    "iqmul",
    "iqpad",
    "iqsigmoid",
    "iqsum",
    "iqtanh",
    "logn_q15",
    "quant",
    "relu",
    "requant",
    "rescale",
    "sigmoid_q11",
    "softmax_int",
    "softmax_q25_row",
    "tanh_q11",
]
