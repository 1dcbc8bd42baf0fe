"""Real Brevitas-exported QONNX models (models/*.onnx) run through ortquant and match qonnx's executor.

The models and their stored reference outputs are made by models/make_models.py (torch + Brevitas, not needed
here). Each ``models/<name>.npz`` holds fixed inputs at batch 1 and 4 and the outputs of qonnx 1.0.0's
``execute_onnx`` on them. When qonnx is installed the outputs are also checked against a fresh qonnx run.

binary_mlp ends its accumulators in BipolarQuant, whose sign test can flip when an exact-arithmetic sum of 0
comes out as +-tiny under another summation order (specs/qonnx.md section 2). The model is built so that
cannot happen (odd fan-ins, BN thresholds halfway between reachable sums; see make_models.BinaryMlp), and
test_binary_mlp_has_a_sign_margin checks the margin on the stored inputs, so that test is order-robust.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import onnx.helper
import onnxruntime as ort
import pytest

import ortquant

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
IR_VERSION = 10
MAX_REL_DIFF = 1e-6

# name -> the op types the model contains (kept in step with models/README.md)
MODELS: dict[str, dict[str, set[str]]] = {
    "cnn_w4a4": {
        "qonnx.custom_op.general": {"Quant", "Trunc"},
        "": {"Conv", "BatchNormalization", "Relu", "AveragePool", "Reshape", "Gemm"},
    },
    "fp8_mlp": {"qonnx.custom_op.general": {"FloatQuant"}, "": {"Gemm", "Relu"}},
    "binary_mlp": {"qonnx.custom_op.general": {"BipolarQuant"}, "": {"Gemm", "BatchNormalization"}},
    "int8_resblock": {
        "qonnx.custom_op.general": {"Quant"},
        "": {"Conv", "Relu", "Add", "MaxPool", "Reshape", "Gemm"},
    },
    # integer mode (issue 10)
    "cnn4c2f_w4a4": {
        "qonnx.custom_op.general": {"Quant"},
        "": {"Conv", "BatchNormalization", "Relu", "MaxPool", "Reshape", "Gemm"},
    },
    "resnet_mini_w6a6": {
        "qonnx.custom_op.general": {"Quant"},
        "": {"Conv", "BatchNormalization", "Relu", "Add", "ReduceMean", "Reshape", "Gemm"},
    },
    "mixed_bits": {"qonnx.custom_op.general": {"Quant"}, "": {"Conv", "BatchNormalization", "Relu", "Reshape", "Gemm"}},
    # FINN's TFC-w1a1 and TFC-w1a2 (integer mode's XNOR-popcount and bit-serial paths)
    "tfc_w1a1": {
        "qonnx.custom_op.general": {"BipolarQuant"},
        "": {"Sub", "Mul", "Reshape", "Gemm", "BatchNormalization", "Div", "Add"},
    },
    "tfc_w1a2": {
        "qonnx.custom_op.general": {"BipolarQuant", "Quant"},
        "": {"Sub", "Mul", "Reshape", "Gemm", "BatchNormalization", "Div", "Add"},
    },
    # a transformer block: two products of quantized activations
    "attn_w8a8": {
        "qonnx.custom_op.general": {"Quant"},
        "": {"MatMul", "Add", "Transpose", "Mul", "Softmax", "ReduceMean", "Gemm"},
    },
}
# The integer-mode benchmark CNN needs its 128 x 4096 float weight (2 MB); every other model is under 1 MB.
MAX_BYTES = {"cnn4c2f_w4a4": 3 << 20}
BATCHES = (1, 4)

# onnxruntime's messages for a node whose op no registered library provides
_MISSING_OP = re.compile(
    r"(\S+?)(?:\(-?\d+\))? is not a registered function/op|Could not find an implementation for (\S+)"
)


def _load(name: str) -> onnx.ModelProto:
    return onnx.load(str(MODELS_DIR / f"{name}.onnx"))


def _stored(name: str) -> dict[str, np.ndarray]:
    with np.load(MODELS_DIR / f"{name}.npz") as data:
        return {k: data[k] for k in data.files}


def _session(name: str, threads: int = 1) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    return ortquant.InferenceSession(MODELS_DIR / f"{name}.onnx", sess_options=so)


@functools.cache
def _missing_op(name: str) -> str | None:
    """The op that keeps onnxruntime from loading the model, if that is the only problem (else None).

    Any other failure to create a session is not hidden: the tests then fail with the real error.
    """
    try:
        _session(name)
    except Exception as e:  # onnxruntime raises its own exception types
        match = _MISSING_OP.search(str(e))
        if match:
            return match.group(1) or match.group(2)
    return None


def _needs_ops(name: str) -> pytest.MarkDecorator:
    missing = _missing_op(name)
    return pytest.mark.skipif(
        missing is not None, reason=f"{name}: ortquant does not register {missing} yet (not on main)"
    )


def _cases() -> Iterator[object]:
    for name in MODELS:
        for batch in BATCHES:
            yield pytest.param(name, batch, id=f"{name}-b{batch}", marks=_needs_ops(name))


def _models() -> Iterator[object]:
    for name in MODELS:
        yield pytest.param(name, id=name, marks=_needs_ops(name))


def _rel_diff(actual: np.ndarray, expected: np.ndarray) -> float:
    """max |actual - expected| over max |expected| (the output's magnitude)."""
    scale = float(np.max(np.abs(expected)))
    return float(np.max(np.abs(actual.astype(np.float64) - expected))) / max(scale, np.finfo(np.float32).tiny)


def _assert_close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    assert actual.dtype == expected.dtype == np.float32, (actual.dtype, expected.dtype)
    assert np.isfinite(expected).all()
    rel = _rel_diff(actual, expected)
    assert rel <= MAX_REL_DIFF, f"max relative difference {rel:.3g} > {MAX_REL_DIFF}"


def _run(sess: ort.InferenceSession, x: np.ndarray) -> np.ndarray:
    (y,) = sess.run(None, {sess.get_inputs()[0].name: x})
    return y


# ---------------------------------------------------------------------------------------------------------
# the committed files


@pytest.mark.parametrize("name", list(MODELS))
def test_model_files_are_as_documented(name: str) -> None:
    """Small, IR 10, dynamic batch, exactly the op types listed (and in models/README.md)."""
    path = MODELS_DIR / f"{name}.onnx"
    assert path.stat().st_size < MAX_BYTES.get(name, 1 << 20)
    model = _load(name)
    assert model.ir_version == IR_VERSION
    assert {o.domain: o.version for o in model.opset_import}.get("qonnx.custom_op.general") == 2
    ops: dict[str, set[str]] = {}
    for node in model.graph.node:
        ops.setdefault(node.domain, set()).add(node.op_type)
    assert ops == MODELS[name]
    assert len(model.graph.input) == len(model.graph.output) == 1
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # batch is symbolic
    stored = _stored(name)
    assert sorted(stored) == sorted([f"{k}_b{b}" for k in ("input", "output") for b in BATCHES])
    for b in BATCHES:
        assert stored[f"input_b{b}"].shape[0] == stored[f"output_b{b}"].shape[0] == b
    readme = (MODELS_DIR / "README.md").read_text()
    assert f"`{name}.onnx`" in readme
    for op in MODELS[name]["qonnx.custom_op.general"]:
        assert op in readme


# ---------------------------------------------------------------------------------------------------------
# ortquant vs the stored qonnx outputs


@pytest.mark.parametrize(("name", "batch"), list(_cases()))
def test_matches_stored_qonnx_outputs(name: str, batch: int) -> None:
    stored = _stored(name)
    y = _run(_session(name), stored[f"input_b{batch}"])
    _assert_close(y, stored[f"output_b{batch}"])


@pytest.mark.parametrize("name", list(_models()))
def test_threads_and_repeat_runs_agree(name: str) -> None:
    """Two intra-op threads give the same result as one; a second run of one session gives the same again."""
    x = _stored(name)["input_b4"]
    sess1 = _session(name, threads=1)
    first = _run(sess1, x)
    np.testing.assert_array_equal(_run(sess1, x), first)
    np.testing.assert_array_equal(_run(_session(name, threads=2), x), first)


def test_binary_mlp_has_a_sign_margin() -> None:
    """The BipolarQuant inputs after accumulators stay well away from 0 on the stored inputs (see module doc).

    Computed with plain numpy from the model's initializers, independent of ortquant and of onnxruntime.
    """
    from onnx import numpy_helper

    model = _load("binary_mlp")
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    bn = next(n for n in model.graph.node if n.op_type == "BatchNormalization")
    gamma, beta, mean, var = (inits[i].astype(np.float64) for i in bn.input[1:5])
    eps = next(a.f for a in bn.attribute if a.name == "epsilon")
    gemm = next(n for n in model.graph.node if n.op_type == "Gemm")
    wq = next(n for n in model.graph.node if n.output[0] == gemm.input[1])
    w = np.where(inits[wq.input[0]] >= 0, 1.0, -1.0) * inits[wq.input[1]].astype(np.float64)
    x = np.where(_stored("binary_mlp")["input_b4"] >= 0, 1.0, -1.0)
    acc = x @ w.T
    bn_out = (acc - mean) / np.sqrt(var + eps) * gamma + beta
    assert np.abs(bn_out).min() > 1e-3


# ---------------------------------------------------------------------------------------------------------
# schemas


@pytest.mark.parametrize("name", list(MODELS))
def test_onnx_checker_full_check(name: str) -> None:
    model = _load(name)
    missing = sorted(
        {f"{n.domain}.{n.op_type}" for n in model.graph.node if n.domain and not onnx.defs.has(n.op_type, n.domain)}
    )
    if missing:
        pytest.xfail(f"ortquant.schemas does not register {', '.join(missing)} yet")
    onnx.checker.check_model(model, full_check=True)


# ---------------------------------------------------------------------------------------------------------
# vs a fresh qonnx run

try:
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.change_batchsize import ChangeBatchSize
    from qonnx.transformation.infer_shapes import InferShapes
except Exception:  # pragma: no cover - qonnx not installed
    execute_onnx = None


@pytest.fixture
def qonnx_ir10(monkeypatch: pytest.MonkeyPatch) -> None:
    """qonnx's executor builds one-node models with onnx.helper.make_model; onnxruntime needs IR <= 13."""
    make_model = onnx.helper.make_model

    def make_model_ir10(graph: onnx.GraphProto, **kwargs: object) -> onnx.ModelProto:
        kwargs.setdefault("ir_version", IR_VERSION)
        return make_model(graph, **kwargs)

    monkeypatch.setattr(onnx.helper, "make_model", make_model_ir10)


def _qonnx_run(name: str, x: np.ndarray) -> np.ndarray:
    wrapped = ModelWrapper(_load(name))
    wrapped = wrapped.transform(ChangeBatchSize(int(x.shape[0]))).transform(InferShapes())
    out = execute_onnx(wrapped, {wrapped.graph.input[0].name: x})
    return np.asarray(out[wrapped.graph.output[0].name])


@pytest.mark.skipif(execute_onnx is None, reason="qonnx not installed")
@pytest.mark.usefixtures("qonnx_ir10")
@pytest.mark.parametrize("name", list(_models()))
def test_matches_fresh_qonnx_run(name: str) -> None:
    """On the stored inputs (the stored outputs are reproducible) and on new inputs at batch 3."""
    stored = _stored(name)
    sess = _session(name)
    x1 = stored["input_b1"]
    want1 = _qonnx_run(name, x1)
    np.testing.assert_array_equal(want1, stored["output_b1"])
    _assert_close(_run(sess, x1), want1)

    rng = np.random.default_rng(7)
    x3 = (2.0 * rng.standard_normal((3, *x1.shape[1:]))).astype(np.float32)
    _assert_close(_run(sess, x3), _qonnx_run(name, x3))
