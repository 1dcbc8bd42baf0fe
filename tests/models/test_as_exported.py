"""Brevitas QONNX exports as ``export_qonnx`` writes them (models/as_exported/, no qonnx cleanup), passed to the
public API in fresh processes where nothing was set up first, as a user loads the file the exporter just wrote.

Such files list every weight and BatchNorm statistic as a graph input with an initializer, keep the dynamic batch
and the exporter's node names, and carry layer kinds models/*.onnx lack: 1-D and grouped convolutions, a
ConvTranspose, a depthwise convolution with a signed HardTanh quantizer, quantized biases (Int32Bias / Int16Bias),
power-of-two scales with TruncAdaptiveAvgPool2d, a QuantEltwiseAdd residual and a Concat of two grids, float average
pools (AveragePool, ReduceMean) between quantizers and layers, a depthwise convolution reading a per-channel
activation quantizer (MobileNet-v1's block), and FINN's
TFC-w1a1 through torch's TorchScript exporter (MatMul + BatchNormalization + BipolarQuant, batch 1). The
models and their qonnx outputs are made by models/make_models.py (``AS_EXPORTED``); the npz files use the real-world
corpus' keys, so ``tests/realworld/rw_worker.py`` runs them, one subprocess per mode. What passes is the corpus
README's definition (tests/realworld/test_realworld.py): default and prepare within 1e-5 of max|reference|, exact
bit for bit, integer mode within 2 % of the output range and every layer lowered that can be.
"""

from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from realworld.rw_client import assert_exact, run_worker, worker_env

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "models" / "as_exported"
# name -> (layers integer mode lowers, layers in all); each short one says why in `ortquant check --integer`
LOWERED = {
    "conv1d_w4a4": (3, 3),
    "convtranspose_w4a4": (3, 3),
    "depthwise_hardtanh_w4a4": (3, 3),
    "fixed_point_cnn_w8a8": (3, 3),
    "int32_bias_mlp_w8a8": (3, 3),
    # the last convolution reads a Concat of two activations with different scales: on no single grid
    "residual_concat_w6a6": (2, 3),
    "tfc_w1a1_torchscript": (4, 4),
    "avgpool_head_w4a4": (3, 3),  # the head reads a ReduceMean (a global average pool) of a quantizer's values
    "depthwise_perchannel_w4a4": (3, 3),  # the depthwise layer reads a per-channel quantizer (act_channel_scales)
}
NAMES = sorted(LOWERED)


def _has_qonnx() -> bool:
    """qonnx's executor importable (not ``tests/qonnx``, which ``tests`` on sys.path makes a namespace package)."""
    try:
        from qonnx.core.onnx_exec import execute_onnx  # noqa: F401
    except ImportError:
        return False
    return True


@functools.cache
def _results(mode: str) -> dict[str, dict[str, Any]]:
    return run_worker(mode, FOLDER, NAMES, timeout=600)


def _outputs(mode: str, name: str) -> dict[str, dict[str, Any]]:
    res = _results(mode)[name]
    assert "error" not in res, f"{name} ({mode}): {res['error']}\n{res.get('trace', '')}"
    assert res["outputs"], res
    for out, e in res["outputs"].items():
        assert not e.get("missing") and e["shape_ok"], f"{name}: output {out}: {e}"
        assert not e["nan_mismatch"], f"{name}: output {out}: {e}"
    return res["outputs"]


def test_the_folder_holds_the_listed_models() -> None:
    assert sorted(p.stem for p in FOLDER.glob("*.onnx")) == NAMES
    assert sorted(p.stem for p in FOLDER.glob("*.npz")) == NAMES
    readme = (ROOT / "models" / "README.md").read_text()
    for name in NAMES:
        assert f"`as_exported/{name}.onnx`" in readme


@pytest.mark.parametrize("mode", ["default", "prepare"])
@pytest.mark.parametrize("name", NAMES)
def test_matches_qonnx(name: str, mode: str) -> None:
    for out, e in _outputs(mode, name).items():
        assert e["max_abs"] <= 1e-5 * e["ref_max"], f"{name}: output {out}: {e}"


@pytest.mark.skipif(not _has_qonnx(), reason="qonnx not installed")
@pytest.mark.parametrize("name", NAMES)
def test_default_matches_qonnx_on_random_inputs(name: str) -> None:
    """16 seeded inputs, qonnx run here. tfc_w1a1_torchscript's BatchNormalization after each MatMul puts exact
    zeros in front of its BipolarQuants for many inputs; folding it into the weights (onnxruntime's MatMul +
    BatchNormalization fusion, which registering the library turns off) turns them into +-tiny and flips signs."""
    res = _results("random")[name]
    for out, e in _outputs("random", name).items():
        assert e["max_abs"] <= 1e-5 * e["ref_max"], f"{name}: output {out}: {res['differing']} of 16 inputs differ: {e}"


@pytest.mark.parametrize("name", NAMES)
def test_exact_is_bit_exact(name: str) -> None:
    _outputs("exact", name)  # present, of the reference's shape, no NaN mismatch
    assert_exact(name, _results("exact")[name])


@pytest.mark.parametrize("name", NAMES)
def test_integer_mode_within_its_contract(name: str) -> None:
    for out, e in _outputs("integer", name).items():
        assert e["max_abs"] <= 0.02 * e["ref_range"], f"{name}: output {out}: {e}"


@pytest.mark.parametrize("name", NAMES)
def test_check_integer_reports_the_lowered_layers(name: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "ortquant", "check", "--integer", str(FOLDER / f"{name}.onnx")],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]
    assert "Traceback" not in proc.stdout + proc.stderr
    found = re.search(r"integer mode: (\d+) of (\d+) layer\(s\) on the integer path", proc.stdout)
    assert found, proc.stdout[-1500:]
    assert (int(found.group(1)), int(found.group(2))) == LOWERED[name], proc.stdout[-1500:]
