"""`make demo` keeps working: the demo script agrees with qonnx (exact=True with difference 0)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "models" / "demo.py"


def test_demo_agrees_with_qonnx(capsys):
    spec = importlib.util.spec_from_file_location("ortquant_demo", DEMO)
    assert spec is not None and spec.loader is not None
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    assert demo.main([]) == 0
    out = capsys.readouterr().out
    assert out.count("exact=True: max abs diff 0 -> agree") == 2
    assert "result: agree" in out
