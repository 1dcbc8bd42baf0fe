"""Helpers of the linger (issue 3) tests: ISA fixture values, random int8 data with edge values, one-node models."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx

from conftest import make_node_model, run_model
from ortquant import kernels

DATA = Path(__file__).resolve().parent.parent / "data" / "linger"
DOMAINS = ["thinker", "onnxinfer"]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest
POW2 = [2.0**k for k in range(-3, 16)]


def int8_data(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random int8 with the extremes and small values (ties after right shifts) planted at the start."""
    x = rng.integers(-128, 128, shape, dtype=np.int8)
    flat = x.reshape(-1)
    edges = np.array([-128, 127, -127, 0, 1, -1, 2, -2, 3, -3, 64, -64, 63, -65, 126, -126], np.int8)
    flat[: min(edges.size, flat.size)] = edges[: flat.size]
    return x


def int16_data(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random int16 with its extremes and tie-prone values planted at the start."""
    x = rng.integers(-32768, 32768, shape, dtype=np.int16)
    flat = x.reshape(-1)
    edges = np.array([-32768, 32767, 0, 1, -1, 128, -128, 127, -129, 32640, -32640, 384, -384, 32639], np.int16)
    flat[: min(edges.size, flat.size)] = edges[: flat.size]
    return x


def run_linger(
    op: str,
    inputs: list[np.ndarray | None],
    attrs: dict[str, Any],
    *,
    domain: str = "thinker",
    const: list[bool] | bool = False,
    out_dtype: int = onnx.TensorProto.INT8,
    threads: int = 1,
) -> np.ndarray:
    """Run one linger node through ortquant.InferenceSession; returns output 0."""
    model, feeds = make_node_model(op, domain, inputs, const=const, attrs=attrs, output_dtypes=[out_dtype])
    return run_model(model, feeds, threads=threads)[0]


def session_error(op: str, inputs: list[np.ndarray | None], attrs: dict[str, Any], **kw: Any) -> str:
    """The error message of creating / running a one-node model that must fail."""
    out_dtype = kw.pop("out_dtype", onnx.TensorProto.INT8)
    model, feeds = make_node_model(op, "thinker", inputs, attrs=attrs, output_dtypes=[out_dtype], **kw)
    try:
        run_model(model, feeds)
    except Exception as e:
        return str(e)
    raise AssertionError(f"{op} with {attrs} did not fail")
