"""What the integer-mode transform tests share: the backend fixture (each test runs on the engine, on the
float-exact backend and on the per-layer choice) and a float32 initializer maker."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import numpy_helper


@pytest.fixture(params=["engine", "float", "mixed"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", request.param)
    return str(request.param)


def init(name: str, v: object, dtype: type = np.float32) -> onnx.TensorProto:
    """An initializer ``name`` holding ``v`` as ``dtype``."""
    return numpy_helper.from_array(np.asarray(v, dtype=dtype), name)
