"""ortquant: run quantized ONNX models (QONNX, linger/thinker, nGraph) in stock onnxruntime.

Three lines for a user::

    import ortquant
    sess = ortquant.InferenceSession("model.onnx")
    outputs = sess.run(None, {"input": x})

For a C/C++ host, load :func:`library_path` with ``RegisterCustomOpsLibrary_V2``.
"""

from __future__ import annotations

from ortquant._library import library_path, native_version, register, supported_ops
from ortquant._session import InferenceSession, prepare_model
from ortquant.schemas import register_schemas

__version__ = "0.1.0"

__all__ = [
    "InferenceSession",
    "__version__",
    "library_path",
    "native_version",
    "prepare_model",
    "register",
    "register_schemas",
    "supported_ops",
]

register_schemas()
