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


# Session config key that marks options ortquant was registered on. onnxruntime.SessionOptions takes no Python
# attributes, and the mark must live in the options themselves; onnxruntime ignores keys it does not know.
_REGISTERED_KEY = "ortquant.registered"


def _is_registered(session_options: Any) -> bool:
    try:
        return session_options.get_session_config_entry(_REGISTERED_KEY) == "1"
    except RuntimeError:  # onnxruntime raises for a key that was never set
        return False


def register(session_options: Any) -> Any:
    """Register ortquant's ops on an ``onnxruntime.SessionOptions`` and return it.

    Registering twice on the same options object is a no-op, also when the first registration was the plain
    ``session_options.register_custom_ops_library(ortquant.library_path())`` (onnxruntime itself would fail at
    session creation with "Domain already set in registry"): the native library marks the options it added its
    domains to with the session config entry ``ortquant.registered`` and skips marked options.
    """
    if _is_registered(session_options):
        return session_options
    session_options.register_custom_ops_library(library_path())
    if not _is_registered(session_options):  # the native library marks the options itself
        session_options.add_session_config_entry(_REGISTERED_KEY, "1")
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
