"""numpy reference of linger 1.1.1's recurrent ops LSTMInt and GRUInt (eval mode), step by step.

Written from the spec (shared/specs/linger.md section 4, decisions 11-13 and 15-16), independent of the C++.
Integer state is kept in Python-sized int64 arrays without any saturation except where the spec saturates, so
this is the exact recipe; the C++ must agree with it bit for bit.

Conventions (Qn = an integer at scale 2^n):
- the input projection ``gi`` and the recurrent projection ``gh`` are int32 sums (exact here in int64) brought to
  Q11 with the luna rounding ``floor(v * r + 0.5)``, r = 2^11 / (scale_x * scale_w);
- the gate sums are saturated to int16 (linger's LSTM does this; for GRU it is decision 12);
- sigmoid/tanh are the 16-segment piecewise-linear functions of the spec (Q11 in, Q7 out), tabulated here
  over all 65,536 int16 inputs by :func:`sigmoid_segment` / :func:`tanh_segment`;
- floats that enter the recurrence (``h0``, ``c0``) are quantized with linger's float32 formula
  ``floor(float32(float32(v * scale) + 0.5))``; internal requantizations use the ratio formula in float64
  (identical for the power-of-two scales linger writes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

F32 = np.float32

# fmt: off
# The 16-segment sigmoid of linger.md (identical to thinker's luna_sigmoid_int8 over all int16 inputs).
SIG_BANDS = (0, 971, 1699, 2347, 2974, 3614, 4291, 5026, 5861, 6831, 7864, 8987, 10375, 11594, 13168, 14730, 32768)
SIG_SLOPES = (32316, 29471, 25891, 22068, 18225, 29057, 22206, 16113, 10881, 27353, 16611, 9242, 4618, 20670,
              8610, 693)
SIG_BIAS_POS = (16384, 16721, 17464, 18559, 19954, 21585, 23380, 25249, 27121, 28807, 30096, 31107, 31839, 32199,
                32502, 32724)
SIG_BIAS_NEG = (16384, 16047, 15304, 14209, 12814, 11183, 9388, 7519, 5647, 3961, 2672, 1661, 929, 569, 266, 44)
# The 16-segment tanh of linger.md (identical to thinker's luna_tanh_int8).
TANH_BANDS = (0, 512, 888, 1226, 1558, 1899, 2264, 2670, 3146, 3734, 4297, 4761, 5466, 6151, 7193, 8093, 32768)
TANH_SLOPES = (32266, 29154, 25374, 21309, 17272, 26886, 19904, 13765, 8599, 19497, 12047, 7324, 3373, 26820,
               5531, 337)
TANH_BIAS = (0, 778, 2417, 4851, 7922, 11474, 15334, 19335, 23303, 26699, 28653, 30026, 31344, 31981, 32565, 32725)
# fmt: on

INT16_MIN, INT16_MAX = -32768, 32767


def _segment(a: int, bands: tuple[int, ...]) -> int:
    """First j in 1..16 with a <= bands[j]; 0 when there is none."""
    for j in range(1, 17):
        if a <= bands[j]:
            return j
    return 0


def _q15_to_q7(q15: int) -> int:
    """floor(q15 / 256 + 0.5) saturated to int8."""
    return min(max((q15 + 128) >> 8, -128), 127)


def sigmoid_segment(v: int) -> int:
    """linger's sigmoid of one int16 Q11 value, Q7 result in [-128, 127] (before the LSTM/GRU clamp to >= 0)."""
    a = abs(v)
    j = _segment(a, SIG_BANDS)
    if j == 0:
        return 0
    sh = 13 if j <= 5 else 14 if j <= 9 else 16 if j <= 13 else 19
    q15 = ((SIG_SLOPES[j - 1] * v) >> sh) + (SIG_BIAS_NEG if v < 0 else SIG_BIAS_POS)[j - 1]
    return _q15_to_q7(q15)


def tanh_segment(v: int) -> int:
    """linger's tanh of one int16 Q11 value, Q7 result in [-128, 127]."""
    a = (32767 if v == INT16_MIN else -v) if v < 0 else v
    j = _segment(a, TANH_BANDS)
    if j == 0:
        return 0
    sh = 11 if j <= 5 else 12 if j <= 9 else 14 if j <= 13 else 18
    slope, bias = TANH_SLOPES[j - 1], TANH_BIAS[j - 1]
    q15 = ((slope * a) >> sh) + bias if v >= 0 else ((-slope * a) >> sh) - bias
    return _q15_to_q7(q15)


def _table(fn) -> np.ndarray:
    return np.array([fn(v) for v in range(INT16_MIN, INT16_MAX + 1)], dtype=np.int64)


_TABLES: dict[str, np.ndarray] = {}


def sigmoid_table() -> np.ndarray:
    """int64[65536]: sigmoid_segment(v) at index v + 32768 (built once)."""
    if "sig" not in _TABLES:
        _TABLES["sig"] = _table(sigmoid_segment)
    return _TABLES["sig"]


def tanh_table() -> np.ndarray:
    """int64[65536]: tanh_segment(v) at index v + 32768 (built once)."""
    if "tanh" not in _TABLES:
        _TABLES["tanh"] = _table(tanh_segment)
    return _TABLES["tanh"]


def sat16(v: np.ndarray) -> np.ndarray:
    """Saturate to the int16 range."""
    return np.clip(v, INT16_MIN, INT16_MAX)


def sig(v: np.ndarray) -> np.ndarray:
    """Gate sigmoid: int16-saturated Q11 in, Q7 out clamped to [0, 127] (linger's castor_luna_sigmoid)."""
    return np.clip(sigmoid_table()[sat16(np.asarray(v, dtype=np.int64)) + 32768], 0, 127)


def tanh(v: np.ndarray) -> np.ndarray:
    """Gate tanh: int16-saturated Q11 in, Q7 out in [-128, 127]."""
    return tanh_table()[sat16(np.asarray(v, dtype=np.int64)) + 32768]


def requant(v: np.ndarray, ratio: float) -> np.ndarray:
    """Luna rounding of integers by a ratio: floor(v * ratio + 0.5), computed in float64 (exact for 2^k ratios)."""
    return np.floor(np.asarray(v, dtype=np.int64).astype(np.float64) * ratio + 0.5).astype(np.int64)


def round_shift(v: np.ndarray, k: int) -> np.ndarray:
    """floor(v / 2^k + 0.5) exactly, for integers."""
    v = np.asarray(v, dtype=np.int64)
    return (v + (1 << (k - 1))) >> k


def quant_float(x: np.ndarray, scale: float) -> np.ndarray:
    """linger's float -> int rounding in float32: floor(float32(float32(x * scale) + 0.5)) as int64 (unsaturated).

    NaN is not defined (the kernel rejects it); +-inf stays +-inf (callers saturate).
    """
    t = (np.asarray(x, dtype=F32) * F32(scale)).astype(F32)
    return np.floor((t + F32(0.5)).astype(F32)).astype(np.float64)


def _sat_float(v: np.ndarray, lo: int, hi: int) -> np.ndarray:
    return np.clip(v, lo, hi).astype(np.int64)


STATE_Q7_LIMIT = 1 << 24  # external c0 (LSTM) and h0 (GRU) in Q7 are saturated to +-2^24 (see docs/ops.md)


@dataclass(frozen=True)
class RnnScales:
    """The scale attributes of LSTMInt/GRUInt. scale_o/o_bits None = float output."""

    scale_i: float
    scale_h: float
    scale_iw: float
    scale_hw: float
    scale_o: float | None = None
    o_bits: int | None = None
    data_bits: int = 8

    @property
    def r_i(self) -> float:
        """Input projection -> Q11."""
        return 2048.0 / (float(self.scale_i) * float(self.scale_iw))

    @property
    def r_h(self) -> float:
        """Recurrent projection -> Q11."""
        return 2048.0 / (float(self.scale_h) * float(self.scale_hw))


def _out_bounds(bits: int) -> tuple[int, int]:
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def _prepare(x, lengths, batch_first):
    x = np.asarray(x)
    if batch_first:
        x = x.transpose(1, 0, 2)
    t_len, batch, _ = x.shape
    lens = np.full(batch, t_len, dtype=np.int64) if lengths is None else np.asarray(lengths, dtype=np.int64)
    return x.astype(np.int64), lens


def _finish(out, batch_first):
    return out.transpose(1, 0, 2) if batch_first else out


class _Emit:
    """Output quantization shared by LSTM and GRU: what one step writes and passes on."""

    def __init__(self, s: RnnScales):
        self.s = s
        self.lo, self.hi = _out_bounds(s.data_bits)

    def step(self, h14: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Q14 hidden -> (output value, float hidden, next qh (int8 at scale_h), next h7 (Q7, for GRU))."""
        s = self.s
        if s.o_bits is not None:
            olo, ohi = _out_bounds(s.o_bits)
            y = np.clip(requant(h14, float(s.scale_o) / 16384.0), olo, ohi)
            hid = (y.astype(F32) / F32(s.scale_o)).astype(F32)
            qh = np.clip(requant(y, float(s.scale_h) / float(s.scale_o)), self.lo, self.hi)
            h7 = requant(y, 128.0 / float(s.scale_o))
            return y, hid, qh, h7
        hid = (h14.astype(F32) / F32(16384.0)).astype(F32)
        qh = np.clip(requant(h14, float(s.scale_h) / 16384.0), self.lo, self.hi)
        return hid, hid, qh, round_shift(h14, 7)


def _check_lengths(lens: np.ndarray, t_len: int) -> None:
    if lens.size and (lens.min() < 1 or lens.max() > t_len):
        raise ValueError(f"lengths must be in [1, {t_len}], got {lens.tolist()}")


def lstm_int(
    x: np.ndarray,
    w_ih: np.ndarray,
    w_hh: np.ndarray,
    b_ih: np.ndarray | None,
    b_hh: np.ndarray | None,
    scales: RnnScales,
    *,
    lengths: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    c0: np.ndarray | None = None,
    batch_first: bool = False,
    go_forward: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LSTMInt as linger 1.1.1 evaluates it. Returns (output, hidden [1,B,H] f32, cell [1,B,H] f32).

    x: int8 [T,B,D] (or [B,T,D] with batch_first); w_ih int8 [4H,D], w_hh int8 [4H,H], biases int32 [4H] (gate
    order i, f, g, o). output: int8 when scales.o_bits is set, else float32 Q14/2^14; its time length is
    max(lengths) (linger's pad_packed_sequence), zeros past each sample's length.
    """
    xs, lens = _prepare(x, lengths, batch_first)
    t_len, batch, _ = xs.shape
    _check_lengths(lens, t_len)
    w_ih = np.asarray(w_ih, dtype=np.int64)
    w_hh = np.asarray(w_hh, dtype=np.int64)
    hsz = w_hh.shape[1]
    b_ih = np.zeros(4 * hsz, np.int64) if b_ih is None else np.asarray(b_ih, dtype=np.int64)
    b_hh = np.zeros(4 * hsz, np.int64) if b_hh is None else np.asarray(b_hh, dtype=np.int64)
    emit = _Emit(scales)
    t_out = int(lens.max()) if batch else t_len
    out = np.zeros((t_out, batch, hsz), dtype=np.int8 if scales.o_bits is not None else F32)
    hidden = np.zeros((1, batch, hsz), F32)
    cell = np.zeros((1, batch, hsz), F32)
    for b in range(batch):
        n = int(lens[b])
        # Step 1 state: qh (int8 at scale_h) and the previous cell in Q7.
        if h0 is not None:
            qh = _sat_float(quant_float(np.asarray(h0)[0, b], scales.scale_h), emit.lo, emit.hi)
        else:
            qh = np.zeros(hsz, np.int64)
        if c0 is not None:
            c7 = _sat_float(quant_float(np.asarray(c0)[0, b], 128.0), -STATE_Q7_LIMIT, STATE_Q7_LIMIT)
        else:
            c7 = np.zeros(hsz, np.int64)
        hid = np.zeros(hsz, F32)
        c14 = np.zeros(hsz, np.int64)
        for t in range(n) if go_forward else range(n - 1, -1, -1):
            # Step 2-3: both projections to Q11, sum saturated to int16.
            gi = requant(w_ih @ xs[t, b] + b_ih, scales.r_i)
            gh = requant(w_hh @ qh + b_hh, scales.r_h)
            g = sat16(gi + gh)
            # Step 4: gates (order i, f, g, o).
            i_g = sig(g[0:hsz])
            f_g = sig(g[hsz : 2 * hsz])
            g_g = tanh(g[2 * hsz : 3 * hsz])
            o_g = sig(g[3 * hsz : 4 * hsz])
            # Step 5-7: cell in Q14, tanh of the cell brought to Q11, hidden in Q14.
            c14 = f_g * c7 + i_g * g_g
            t7 = tanh(sat16(round_shift(c14, 3)))
            h14 = o_g * t7
            # Step 8: output, and the state the next step sees.
            y, hid, qh, _ = emit.step(h14)
            out[t, b] = y
            c7 = round_shift(c14, 7)
        hidden[0, b] = hid
        cell[0, b] = (c14.astype(F32) / F32(16384.0)).astype(F32)
    return _finish(out, batch_first), hidden, cell


def gru_int(
    x: np.ndarray,
    w_ih: np.ndarray,
    w_hh: np.ndarray,
    b_ih: np.ndarray | None,
    b_hh: np.ndarray | None,
    scales: RnnScales,
    *,
    lengths: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    batch_first: bool = False,
    go_forward: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """GRUInt as linger 1.1.1 evaluates it. Returns (output, hidden [1,B,H] f32).

    Weights int8 [3H,D], [3H,H], biases int32 [3H] in gate order r, z, n; otherwise as :func:`lstm_int`.
    """
    xs, lens = _prepare(x, lengths, batch_first)
    t_len, batch, _ = xs.shape
    _check_lengths(lens, t_len)
    w_ih = np.asarray(w_ih, dtype=np.int64)
    w_hh = np.asarray(w_hh, dtype=np.int64)
    hsz = w_hh.shape[1]
    b_ih = np.zeros(3 * hsz, np.int64) if b_ih is None else np.asarray(b_ih, dtype=np.int64)
    b_hh = np.zeros(3 * hsz, np.int64) if b_hh is None else np.asarray(b_hh, dtype=np.int64)
    emit = _Emit(scales)
    t_out = int(lens.max()) if batch else t_len
    out = np.zeros((t_out, batch, hsz), dtype=np.int8 if scales.o_bits is not None else F32)
    hidden = np.zeros((1, batch, hsz), F32)
    for b in range(batch):
        n = int(lens[b])
        if h0 is not None:
            hb = np.asarray(h0)[0, b]
            qh = _sat_float(quant_float(hb, scales.scale_h), emit.lo, emit.hi)
            h7 = _sat_float(quant_float(hb, 128.0), -STATE_Q7_LIMIT, STATE_Q7_LIMIT)
        else:
            qh = np.zeros(hsz, np.int64)
            h7 = np.zeros(hsz, np.int64)
        hid = np.zeros(hsz, F32)
        for t in range(n) if go_forward else range(n - 1, -1, -1):
            gi = requant(w_ih @ xs[t, b] + b_ih, scales.r_i)
            gh = requant(w_hh @ qh + b_hh, scales.r_h)
            r = sig(gi[0:hsz] + gh[0:hsz])
            z = sig(gi[hsz : 2 * hsz] + gh[hsz : 2 * hsz])
            rn = round_shift(r * gh[2 * hsz : 3 * hsz], 7)  # Q7 * Q11 = Q18 -> Q11
            nn = tanh(gi[2 * hsz : 3 * hsz] + rn)
            h14 = nn * 128 + z * (h7 - nn)
            y, hid, qh, h7 = emit.step(h14)
            out[t, b] = y
        hidden[0, b] = hid
    return _finish(out, batch_first), hidden


def is_power_of_two(v: float) -> bool:
    """True for 2^k (any integer k) as a float."""
    if not (v > 0 and math.isfinite(v)):
        return False
    m, _ = math.frexp(v)
    return m == 0.5
