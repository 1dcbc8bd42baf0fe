"""The ortquant command line: run, check, bench on small models."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import onnx
import pytest

from conftest import make_node_model
from ortquant.cli import main


@pytest.fixture
def quant_model(tmp_path):
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    model, _ = make_node_model(
        "Quant",
        "qonnx.custom_op.general",
        [x, np.float32(0.5), np.float32(0), np.float32(3)],
        const=[False, True, True, True],
    )
    path = tmp_path / "quant.onnx"
    onnx.save(model, path)
    np.save(tmp_path / "x.npy", x)
    return path, x


def test_run_with_input_file(quant_model, tmp_path, capsys):
    path, _ = quant_model
    assert main(["run", str(path), "--input", f"in0={tmp_path / 'x.npy'}"]) == 0
    out = capsys.readouterr().out
    # x/0.5 clamps to [-4, 3] then scales back: -3 -> -2.0 and 3 -> 1.5
    assert "out0: float32 [2, 3, 4]" in out and "-2." in out and "1.5" in out and "latency" in out


def test_run_random(quant_model, capsys):
    path, _ = quant_model
    assert main(["run", str(path), "--random"]) == 0
    assert "out0: float32 [2, 3, 4]" in capsys.readouterr().out


def test_run_missing_input_is_an_error(quant_model):
    path, _ = quant_model
    with pytest.raises(SystemExit, match="missing inputs"):
        main(["run", str(path)])


def test_check_supported(quant_model, capsys):
    path, _ = quant_model
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "qonnx.custom_op.general::Quant" in out and "session loads" in out


def test_check_unsupported_op(tmp_path, capsys):
    model, _ = make_node_model("Frobnicate", "qonnx.custom_op.general", [np.ones(3, np.float32)])
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "NO" in out and "no ortquant kernel for qonnx.custom_op.general::Frobnicate" in out


def test_check_reports_bad_attribute(tmp_path, capsys):
    model, _ = make_node_model(
        "Quant",
        "qonnx.custom_op.general",
        [np.ones(3, np.float32), np.float32(1), np.float32(0), np.float32(8)],
        attrs={"rounding_mode": "WOBBLE"},
    )
    path = tmp_path / "badattr.onnx"
    onnx.save(model, path)
    assert main(["check", str(path)]) == 1
    assert "WOBBLE" in capsys.readouterr().out


def test_bench(quant_model, capsys):
    path, _ = quant_model
    assert main(["bench", str(path), "--runs", "5", "--warmup", "1"]) == 0
    assert "median" in capsys.readouterr().out


def test_module_entry_point(quant_model):
    path, _ = quant_model
    r = subprocess.run([sys.executable, "-m", "ortquant", "check", str(path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "all supported" in r.stdout


def test_check_generic_partition_is_explained(tmp_path, capsys):
    model, _ = make_node_model(
        "GenericPartition", "qonnx.custom_op.general", [np.ones(3, np.float32)], attrs={"model": "sub.onnx"}
    )
    path = tmp_path / "gp.onnx"
    onnx.save(model, path)
    assert main(["check", str(path)]) == 1
    assert "GenericPartition is not supported" in capsys.readouterr().out


def test_check_integer_says_per_layer_which_path(capsys):
    from pathlib import Path

    models = Path(__file__).resolve().parents[1] / "models"
    assert main(["check", "--integer", str(models / "cnn_w4a4.onnx")]) == 0
    out = capsys.readouterr().out
    assert out.count("int   Conv_") == 3
    assert "float Gemm_0" in out and "produced by Trunc" in out
    assert "integer mode: 3 of 4 layer(s) on the integer path" in out


def test_run_and_bench_integer(capsys):
    from pathlib import Path

    model = Path(__file__).resolve().parents[1] / "models" / "mixed_bits.onnx"
    assert main(["run", str(model), "--random", "--integer"]) == 0
    assert main(["bench", str(model), "--integer", "--runs", "3", "--warmup", "1"]) == 0
    assert "median" in capsys.readouterr().out
