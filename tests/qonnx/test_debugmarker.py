"""QONNX DebugMarker: the identity (qonnx also copies the value into its execution context under
export_debug_name, which an onnxruntime graph cannot express)."""

from __future__ import annotations

import numpy as np
import pytest
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import SPECIAL_F32, assert_bitexact, make_node_model, run_model, run_node
from ortquant.reference import qonnx_structural as ref

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
OP = "DebugMarker"
ATTRS = {"export_debug_name": "dbg"}


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (2, 3, 4, 5), (300, 1000)])
def test_identity(domain, shape, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    if x.size >= SPECIAL_F32.size:
        x.reshape(-1)[: SPECIAL_F32.size] = SPECIAL_F32
    for threads in (1, 2):
        (y,) = run_node(OP, domain, [x], attrs=ATTRS, threads=threads)
        assert_bitexact(y, ref.debug_marker(x))


def test_constant_input_is_folded(rng):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    model, _ = make_node_model(OP, DOMAINS[0], [x], const=True, attrs=ATTRS)
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        (y,) = sess.run(None, {})
        assert_bitexact(y, x)


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
def test_against_qonnx(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x.reshape(-1)[: SPECIAL_F32.size] = SPECIAL_F32
    want = qonnx_execute(qonnx_node(OP, 1, **ATTRS), [x])
    (got,) = run_node(OP, DOMAINS[0], [x], attrs=ATTRS)
    assert_bitexact(got, want)


def _error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


def test_missing_or_bad_attribute():
    x = np.ones(3, np.float32)
    msg = _error(make_node_model(OP, DOMAINS[0], [x]))
    assert "debugmarker_node" in msg and "'export_debug_name'" in msg
    msg = _error(make_node_model(OP, DOMAINS[0], [x], attrs={"export_debug_name": 5}))
    assert "debugmarker_node" in msg and "'export_debug_name'" in msg


def test_wrong_dtype_and_input_count():
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones(3)], attrs=ATTRS))
    assert "debugmarker_node" in msg and "double" in msg
    x = np.ones(3, np.float32)
    msg = _error(make_node_model(OP, DOMAINS[0], [x, x], attrs=ATTRS))
    assert "debugmarker_node" in msg
