"""numpy reference of the QONNX elementwise ops BipolarQuant, Trunc (v1/v2) and FloatQuant.

Written from the spec (shared/specs/qonnx.md sections 2-4, decisions 6 and 7), independent of the C++.
Arithmetic is float32 where qonnx computes in float32 and float64 where numpy's type promotion makes qonnx
compute in float64 (Trunc v1 with an integer bit width; FloatQuant's clamp and final product).

Three quantities are computed here with exact math instead of numpy's float32 transcendental functions, which on
AVX-512 machines come from a SIMD library that is not correctly rounded (so qonnx's own results depend on the
machine there):

* powers of two with a non-integer exponent (non-integer bit widths): ``2.0 ** d`` in Python double precision
  rounded once to float32, which is what a correctly rounded ``powf`` gives;
* Trunc v2's ``round(log2(out_scale / scale))``: the exact nearest integer (ties cannot occur);
* FloatQuant's ``floor(log2(|v| + tiny))``: the exact binary exponent (decision 7).
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def bipolar_quant(x: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """BipolarQuant: (x >= 0 ? +1 : -1) * scale; -0 gives +1 and NaN gives -1."""
    x = np.asarray(x, F32)
    scale = np.asarray(scale, F32)
    q = np.where(x >= F32(0), F32(1), F32(-1)).astype(F32)
    return (q * scale).astype(F32)
