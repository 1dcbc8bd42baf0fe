"""ortquant: run quantized ONNX models (QONNX, linger/thinker, nGraph) in stock onnxruntime.

Three lines for a user::

    import ortquant
    sess = ortquant.InferenceSession("model.onnx")
    outputs = sess.run(None, {"input": x})

For a C/C++ host, load :func:`library_path` with ``RegisterCustomOpsLibrary_V2``.

Importing ortquant changes no global state: ONNX op schemas (for ``onnx.checker`` / shape inference) are
registered only by :func:`register_schemas` (which the functions that need them call themselves), and
``ortquant.kernels`` (the pybind11 module) is loaded on first use. onnxruntime is not a pip dependency (an
``onnxruntime`` requirement would replace an installed onnxruntime-gpu/-openvino/-directml): install one yourself
(``pip install onnxruntime`` for the CPU one).
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from typing import TYPE_CHECKING, Any

from ortquant._library import get_library_path, library_path, native_version, register, supported_ops
from ortquant._session import InferenceSession, prepare_model
from ortquant.schemas import register_schemas

if TYPE_CHECKING:  # loaded lazily by __getattr__
    from ortquant import kernels, ray, reference, transforms  # noqa: F401

# The release; pyproject.toml's [project] version and CHANGELOG.md say the same (tests/test_packaging.py checks it).
__version__ = "0.1.0"

__all__ = [
    "InferenceSession",
    "__version__",
    "get_library_path",
    "library_path",
    "native_version",
    "prepare_model",
    "register",
    "register_schemas",
    "supported_ops",
]

# Submodules reachable as attributes of the package without importing them up front (``ortquant.kernels``
# loads the native _C module; most users never need it; ``ortquant.ray`` imports Ray only when it asks Ray
# something, so reaching it never imports Ray).
_LAZY_SUBMODULES = frozenset({"kernels", "ray", "reference", "transforms", "cli"})


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"ortquant.{name}")
    raise AttributeError(f"module 'ortquant' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY_SUBMODULES)


if importlib.util.find_spec("onnxruntime") is None:
    # Not an error: library_path() (for C/C++ hosts and Triton), prepare_model, the schemas and the references
    # work without it. InferenceSession raises an ImportError with the same advice.
    from ortquant._library import ONNXRUNTIME_MISSING

    warnings.warn(ONNXRUNTIME_MISSING, stacklevel=2)
