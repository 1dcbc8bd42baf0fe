"""QONNX GenericPartition is not supported (decision 8): session creation fails with a message naming the node."""

from __future__ import annotations

import numpy as np
import pytest

import ortquant
from conftest import make_node_model

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
OP = "GenericPartition"


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize(
    "inputs,n_outputs",
    [
        ([np.ones((2, 3), np.float32)], 1),
        ([np.ones((2, 3), np.float32), np.ones(2, np.int64)], 2),
        ([], 1),
    ],
)
def test_session_creation_fails_clearly(domain, inputs, n_outputs):
    model, _ = make_node_model(OP, domain, inputs, attrs={"model": "partition_0.onnx"}, n_outputs=n_outputs)
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    msg = str(e.value)
    assert "GenericPartition node 'genericpartition_node'" in msg and "not supported" in msg
    assert "partition_0.onnx" in msg


def test_not_listed_as_supported():
    ops = ortquant.supported_ops()
    assert not any(op == OP for _, op in ops)
    assert ("qonnx.custom_op.general", "MultiThreshold") in ops
