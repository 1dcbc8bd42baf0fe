"""Where the native op library is, how to register it with onnxruntime, and what it provides."""

from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path
from typing import Any

_LIB_NAME = "libortquant.so"


def library_path() -> str:
    """Return the absolute path of ``libortquant.so``, the onnxruntime custom-op library.

    ``ORTQUANT_LIBRARY`` in the environment overrides the packaged file (useful for testing a build).
    Raises ``FileNotFoundError`` if the library is missing (a broken install).
    """
    override = os.environ.get("ORTQUANT_LIBRARY")
    path = Path(override) if override else Path(__file__).resolve().parent / _LIB_NAME
    if not path.is_file():
        raise FileNotFoundError(f"ortquant native library not found at {path}; reinstall ortquant")
    return str(path)


def register(session_options: Any) -> Any:
    """Register ortquant's ops on an ``onnxruntime.SessionOptions`` and return it.

    Registering twice on the same options object is a no-op (onnxruntime itself would fail with
    "Domain already set in registry").
    """
    if getattr(session_options, "_ortquant_registered", False):
        return session_options
    session_options.register_custom_ops_library(library_path())
    try:
        session_options._ortquant_registered = True
    except AttributeError:  # pragma: no cover - options objects without __dict__
        pass
    return session_options


@functools.cache
def _native() -> ctypes.CDLL:
    lib = ctypes.CDLL(library_path())
    lib.OrtQuantOpList.restype = ctypes.c_char_p
    lib.OrtQuantVersion.restype = ctypes.c_char_p
    return lib


def supported_ops() -> frozenset[tuple[str, str]]:
    """Every (domain, op_type) pair the native library registers with onnxruntime."""
    text = _native().OrtQuantOpList().decode()
    pairs = (line.split("\t") for line in text.splitlines() if line)
    return frozenset((d, o) for d, o in pairs)


def native_version() -> str:
    """The version string compiled into ``libortquant.so``."""
    return _native().OrtQuantVersion().decode()
