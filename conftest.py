"""pytest set-up for runs from the repository root (pyproject's ``pythonpath`` puts ``python/`` and ``tests/`` on
``sys.path``, so ``pytest`` needs no PYTHONPATH).

- Subprocesses the tests start (fresh interpreters, the CLI, examples) import the same developer build: PYTHONPATH
  gets ``python/`` and ``tests/`` too.
- With ``ORTQUANT_TEST_INSTALLED=1`` (make wheel-test, make ort-matrix) the installed wheel is under test, never the
  source tree: ``python/`` is taken off ``sys.path`` again.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

_ROOT = Path(__file__).resolve().parent
_SOURCE = str(_ROOT / "python")

if os.environ.get("ORTQUANT_TEST_INSTALLED") == "1":
    while _SOURCE in sys.path:
        sys.path.remove(_SOURCE)
else:
    _parts = [_SOURCE, str(_ROOT / "tests"), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in _parts if p))
