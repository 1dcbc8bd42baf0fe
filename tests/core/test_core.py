"""Runs the C++ unit tests of csrc/core that have no Python binding (tests/core/*.cc, built by CMake as
ortquant_core_test by `make build`)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_core_unit_tests_pass() -> None:
    exe = Path(os.environ.get("ORTQUANT_BUILD_DIR", REPO / "build")) / "ortquant_core_test"
    if not exe.is_file():
        pytest.skip(f"core test binary not built: {exe} (run `make build`, or set ORTQUANT_BUILD_DIR)")
    r = subprocess.run([str(exe)], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.strip().endswith("ok")
