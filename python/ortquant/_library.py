"""Where the native op library is, how to register it with onnxruntime, and what it provides."""

from __future__ import annotations

import ctypes
import functools
import os
import re
from pathlib import Path
from typing import Any

_LIB_NAME = "libortquant.so"

ONNXRUNTIME_MISSING = (
    "ortquant needs an onnxruntime package to run models, and none is installed. Install exactly one of: "
    "pip install onnxruntime (CPU), or onnxruntime-gpu, onnxruntime-openvino, "
    "onnxruntime-directml (ortquant's ops run on the CPU inside any of them). ortquant does not depend on "
    "onnxruntime itself so that it never replaces the one you have."
)


# The oldest onnxruntime the conformance tests pass with (tools/ort_matrix.txt, README "Supported onnxruntime
# versions"). Older releases fail some conformance cases (IR 10 models on 1.17, the output types of o_bits ops and
# FloatQuant's signed zeros on 1.18); the native library refuses to register on them.
OLDEST_ONNXRUNTIME = "1.19.0"


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:3])


def import_onnxruntime() -> Any:
    """``import onnxruntime``, or an ImportError that says what to install."""
    try:
        import onnxruntime
    except ImportError as e:
        raise ImportError(ONNXRUNTIME_MISSING) from e
    if not hasattr(onnxruntime, "InferenceSession"):
        # What pip leaves behind when onnxruntime and onnxruntime-gpu were both installed and one was removed.
        raise ImportError(
            f"the onnxruntime package at {getattr(onnxruntime, '__path__', '?')} is broken (no InferenceSession; "
            "typically two onnxruntime variants were installed over each other and one was uninstalled): "
            "uninstall all onnxruntime* packages, then install exactly one"
        )
    return onnxruntime


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


def get_library_path() -> str:
    """Same as :func:`library_path` (the name onnxruntime-extensions uses for its op library)."""
    return library_path()


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

    Raises ``RuntimeError`` on an onnxruntime older than the oldest supported release (1.19.0), naming both
    versions. Registering twice on the same options object is a no-op, also when the first registration was the plain
    ``session_options.register_custom_ops_library(ortquant.library_path())`` (onnxruntime itself would fail at
    session creation with "Domain already set in registry"): the native library marks the options it added its
    domains to with the session config entry ``ortquant.registered`` and skips marked options.
    """
    if _is_registered(session_options):
        return session_options
    _check_onnxruntime_version()
    session_options.register_custom_ops_library(library_path())
    if not _is_registered(session_options):  # the native library marks the options itself
        session_options.add_session_config_entry(_REGISTERED_KEY, "1")
    return session_options


def _check_onnxruntime_version() -> None:
    import onnxruntime

    version = getattr(onnxruntime, "__version__", "")
    if version and _version_tuple(version) < _version_tuple(OLDEST_ONNXRUNTIME):
        # The native library refuses these releases too (RegisterCustomOps returns an error status); saying it
        # here gives Python users one plain line instead of onnxruntime's wrapped status.
        raise RuntimeError(
            f"ortquant needs onnxruntime >= {OLDEST_ONNXRUNTIME}; this process runs onnxruntime {version} "
            f"(at {getattr(onnxruntime, '__file__', '?')}): upgrade it, e.g. "
            f"pip install 'onnxruntime>={OLDEST_ONNXRUNTIME}'"
        )


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
