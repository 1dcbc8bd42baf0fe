"""Shared test helpers: build one-node models, run them through onnxruntime with ortquant registered."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant

# No global set-up here: every test runs in the state a user's process has after `import ortquant` (in particular
# no ONNX schemas are registered; a test that checks a model with onnx.checker registers them itself, as a user
# must). tests/realworld/ runs published models in fresh processes through the public API.

try:  # the exception types onnxruntime raises
    from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument, InvalidGraph, RuntimeException

    ORT_ERRORS: tuple[type[BaseException], ...] = (Fail, InvalidArgument, InvalidGraph, RuntimeException)
except ImportError:  # pragma: no cover - layout of another onnxruntime release
    ORT_ERRORS = (RuntimeError,)

IR_VERSION = 10  # onnx 1.23 writes 14 by default, onnxruntime 1.31 reads at most 13 (decision 17)

# onnx 1.19 and later call the schemas' Python shape-inference functions; before (make onnx-matrix: 1.16.2) plain
# onnx.shape_inference cannot type ortquant's ops, only ortquant's own transforms._util.infer_shapes does.
needs_onnx_python_inference = pytest.mark.skipif(
    not hasattr(onnx.defs.OpSchema, "set_type_and_shape_inference_function"),
    reason="onnx before 1.19 cannot call Python shape-inference functions (tests/test_onnx_versions.py covers it)",
)

_SOURCE = Path(__file__).resolve().parents[1] / "python"


def subprocess_env() -> dict[str, str]:
    """The environment of a test's fresh Python process: this one's, with the source tree's package first on
    PYTHONPATH (the developer build), except under ``ORTQUANT_TEST_INSTALLED=1`` (make wheel-test, make
    ort-matrix), where the installed wheel is what is tested and the source tree must not shadow it."""
    env = dict(os.environ)
    if env.get("ORTQUANT_TEST_INSTALLED") != "1":
        parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join([str(_SOURCE), *(p for p in parts if p != str(_SOURCE))])
    return env


NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int16): TensorProto.INT16,
    np.dtype(np.uint16): TensorProto.UINT16,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.uint32): TensorProto.UINT32,
    np.dtype(np.uint64): TensorProto.UINT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}


def make_node_model(
    op_type: str,
    domain: str,
    inputs: Sequence[np.ndarray | None],
    *,
    const: Sequence[bool] | bool = False,
    attrs: dict[str, Any] | None = None,
    n_outputs: int = 1,
    output_dtypes: Sequence[int] | None = None,
    opset: int = 1,
    extra_opsets: dict[str, int] | None = None,
) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """A model with one custom node. inputs[i] = None leaves an optional input empty.

    const: per input (or for all), whether the input is an initializer rather than a graph input.
    Returns the model and the feed dict for its graph inputs.
    """
    if isinstance(const, bool):
        const = [const] * len(inputs)
    names, graph_inputs, inits, feeds = [], [], [], {}
    for i, (arr, c) in enumerate(zip(inputs, const, strict=True)):
        if arr is None:
            names.append("")
            continue
        name = f"in{i}"
        names.append(name)
        arr = np.asarray(arr)
        if c:
            inits.append(numpy_helper.from_array(arr, name))
        else:
            graph_inputs.append(helper.make_tensor_value_info(name, NP_TO_ONNX[arr.dtype], list(arr.shape)))
            feeds[name] = arr
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, names, outs, domain=domain, name=f"{op_type.lower()}_node", **(attrs or {}))
    out_types = output_dtypes or [TensorProto.FLOAT] * n_outputs
    graph = helper.make_graph(
        [node],
        "g",
        graph_inputs,
        [helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, out_types, strict=True)],
        initializer=inits,
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(domain, opset)]
    for d, v in (extra_opsets or {}).items():
        opsets.append(helper.make_opsetid(d, v))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = IR_VERSION
    return model, feeds


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray], threads: int = 1) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    sess = ortquant.InferenceSession(model, sess_options=so)
    return sess.run(None, feeds)


def run_node(op_type: str, domain: str, inputs: Sequence[np.ndarray | None], **kw: Any) -> list[np.ndarray]:
    threads = kw.pop("threads", 1)
    model, feeds = make_node_model(op_type, domain, inputs, **kw)
    return run_model(model, feeds, threads=threads)


def assert_bitexact(actual: np.ndarray, expected: np.ndarray) -> None:
    """Same shape, dtype and values; NaN equals NaN; the sign of zero must match too."""
    actual = np.asarray(actual)
    expected = np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype, (actual.dtype, expected.dtype)
    if actual.dtype.kind == "f":
        same = (actual == expected) | (np.isnan(actual) & np.isnan(expected))
        same &= (np.signbit(actual) == np.signbit(expected)) | np.isnan(expected)
    else:
        same = actual == expected
    if not same.all():
        bad = np.argwhere(~same)[:5]
        details = [(tuple(i), actual[tuple(i)], expected[tuple(i)]) for i in bad]
        raise AssertionError(f"{(~same).sum()} of {same.size} elements differ, first: {details}")


SPECIAL_F32 = np.array(
    [
        0.0,
        -0.0,
        np.inf,
        -np.inf,
        np.nan,
        0.5,
        -0.5,
        1.5,
        -1.5,
        2.5,
        -2.5,
        0.49999997,
        -0.49999997,
        1e30,
        -1e30,
        1e-45,
        8388609.0,
        -8388609.0,
        127.5,
        -128.5,
        3.0,
        1.0000001,
    ],
    dtype=np.float32,
)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)
