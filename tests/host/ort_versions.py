"""The onnxruntime releases Triton Inference Server ships, fetched from PyPI into a cache outside git.

Each release's cp3XX manylinux wheel is downloaded with pip (``pip download onnxruntime==V --no-deps``) and its
``onnxruntime/`` package directory is unpacked into ``CACHE/V/onnxruntime/`` (nothing is installed): the host
test dlopen()s ``CACHE/V/onnxruntime/capi/libonnxruntime.so.V``, and a Python subprocess with ``CACHE/V`` first on
``PYTHONPATH`` imports that very release for the Python path. The wheel itself is deleted after unpacking.

CACHE is ``$ORTQUANT_ORT_LIBS_DIR``, else ``$ORTQUANT_CACHE_DIR/ort-libs``, else ``~/.cache/ortquant/ort-libs``.

    python tests/host/ort_versions.py [VERSION ...]     # fetch (default: every TRITON_ORT_VERSIONS entry)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# onnxruntime in Triton's containers (the onnxruntime backend), oldest first. For the 1.23 and 1.24 lines the
# newest patch release is taken: custom-op registration does not change within a minor release.
TRITON_ORT_VERSIONS: dict[str, str] = {
    "1.19.2": "Triton 24.12",
    "1.20.1": "a Triton release between 24.12 and 25.04",
    "1.21.0": "Triton 25.04",
    "1.22.0": "a Triton release between 25.04 and 26.07",
    "1.23.2": "a Triton release between 25.04 and 26.07 (1.23.x)",
    "1.24.4": "a Triton release between 25.04 and 26.07 (1.24.x)",
    "1.27.0": "Triton 26.07 and later",
}


def cache_dir() -> Path:
    if os.environ.get("ORTQUANT_ORT_LIBS_DIR"):
        return Path(os.environ["ORTQUANT_ORT_LIBS_DIR"])
    base = os.environ.get("ORTQUANT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "ortquant"
    )
    return Path(base) / "ort-libs"


def site_dir(version: str) -> Path:
    """The directory to put first on PYTHONPATH to import this onnxruntime release."""
    return cache_dir() / version


def library(version: str) -> Path | None:
    """The unpacked libonnxruntime.so of a release, or None if it is not in the cache."""
    capi = site_dir(version) / "onnxruntime" / "capi"
    libs = sorted(p for p in capi.glob("libonnxruntime.so*") if p.is_file()) if capi.is_dir() else []
    return libs[-1] if libs else None


def fetch(version: str) -> Path:
    """Download and unpack one release (a no-op when it is cached); returns its libonnxruntime.so."""
    have = library(version)
    if have is not None:
        return have
    dest = site_dir(version)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", f"onnxruntime=={version}", "--no-deps", "--only-binary=:all:"]
        r = subprocess.run([*cmd, "-d", tmp, "-q"], capture_output=True, text=True, check=False)
        wheels = list(Path(tmp).glob("onnxruntime-*.whl"))
        if r.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(f"pip download onnxruntime=={version} failed:\n{r.stdout}\n{r.stderr}")
        partial = dest.with_name(dest.name + ".partial")
        with zipfile.ZipFile(wheels[0]) as z:
            for name in z.namelist():
                if name.startswith("onnxruntime/") and not name.startswith("onnxruntime/tools/"):
                    z.extract(name, partial)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(partial, dest)  # a half-unpacked release is never taken for a cached one
    lib = library(version)
    if lib is None:
        raise RuntimeError(f"the onnxruntime {version} wheel has no onnxruntime/capi/libonnxruntime.so*")
    return lib


def main(argv: list[str]) -> int:
    for v in argv or list(TRITON_ORT_VERSIONS):
        print(f"onnxruntime {v}: {fetch(v)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
