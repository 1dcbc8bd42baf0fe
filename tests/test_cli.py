"""The ortquant command line: run, check, bench on small models."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pytest

import ortquant
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


def test_run_missing_input_is_an_error(quant_model, capsys):
    path, _ = quant_model
    assert main(["run", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ortquant run: error: missing inputs ['in0']") and err.count("\n") == 1


def test_check_supported(quant_model, capsys):
    path, _ = quant_model
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ok" in out and "qonnx.custom_op.general::Quant" in out and "session loads" in out


@pytest.mark.parametrize(("bits", "signed", "noted"), [(1, 1, True), (1, 0, False), (2, 1, False)])
def test_check_notes_a_signed_one_bit_quant(tmp_path, capsys, bits, signed, noted):
    # qonnx (and ortquant) compute a signed 1-bit Quant as bipolar +-1; Brevitas' signed 1-bit integer quantizer
    # has the levels -1 and 0: check says so
    x = np.linspace(-3, 3, 24, dtype=np.float32).reshape(2, 3, 4)
    model, _ = make_node_model(
        "Quant",
        "qonnx.custom_op.general",
        [x, np.float32(0.5), np.float32(0), np.float32(bits)],
        const=[False, True, True, True],
        attrs={"signed": signed},
    )
    path = tmp_path / "q.onnx"
    onnx.save(model, path)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert ("note: Quant" in out and "bipolar" in out and "-1 and 0" in out) == noted, out
    assert main(["check", str(path), "--json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert len(notes) == (1 if noted else 0)


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


def test_bench_json(quant_model, tmp_path, capsys):
    path, _ = quant_model
    out = tmp_path / "figures.json"
    assert main(["bench", str(path), "--runs", "7", "--warmup", "2", "--batch", "2", "--json", str(out)]) == 0
    fig = json.loads(out.read_text())
    ours = fig["ortquant_onnxruntime"]
    assert ours["runs"] == 7 and 0 < ours["min_ms"] <= ours["median_ms"] <= ours["p90_ms"] <= ours["max_ms"]
    assert fig["batch"] == 2 and fig["warmup"] == 2 and fig["model"] == str(path)
    assert fig["onnxruntime"] == ort.__version__ and fig["ortquant"] == ortquant.__version__
    assert "figures written to" in capsys.readouterr().out


class _FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("backend", ["tqdm", "text"])
def test_bench_progress_on_a_terminal_only(quant_model, monkeypatch, backend):
    path, _ = quant_model
    if backend == "text":  # neither tqdm nor rich importable: the plain bar
        monkeypatch.setitem(sys.modules, "tqdm", None)
        monkeypatch.setitem(sys.modules, "rich", None)
        monkeypatch.setitem(sys.modules, "rich.progress", None)
    else:
        pytest.importorskip("tqdm")
    term = _FakeTerminal()
    monkeypatch.setattr(sys, "stderr", term)
    assert main(["bench", str(path), "--runs", "4", "--warmup", "1"]) == 0
    shown = term.getvalue()
    assert "ortquant" in shown and "/5" in shown, shown  # label and total (warm-up + runs)
    quiet = _FakeTerminal()
    monkeypatch.setattr(sys, "stderr", quiet)
    assert main(["bench", str(path), "--runs", "4", "--warmup", "1", "--no-progress"]) == 0
    assert quiet.getvalue() == ""
    piped = io.StringIO()  # not a terminal: no bar
    monkeypatch.setattr(sys, "stderr", piped)
    assert main(["bench", str(path), "--runs", "4", "--warmup", "1"]) == 0
    assert piped.getvalue() == ""


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


def _default_domain_quant(tmp_path):
    """Quant in the default domain at opset 11 (older Brevitas/FINN): needs the fix_legacy_domains rewrite."""
    model, _ = make_node_model(
        "Quant",
        "qonnx.custom_op.general",
        [np.zeros((2, 3), np.float32), np.float32(0.5), np.float32(0), np.float32(3)],
        const=[False, True, True, True],
    )
    model.graph.node[0].domain = ""
    del model.opset_import[:]
    model.opset_import.append(onnx.helper.make_opsetid("", 11))
    path = tmp_path / "legacy.onnx"
    onnx.save(model, path)
    return path


def test_check_model_that_needs_a_rewrite(tmp_path, capsys):
    path = _default_domain_quant(tmp_path)
    assert main(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "rewrite fix_legacy_domains" in out
    assert "ai.onnx::Quant -> qonnx.custom_op.general::Quant" in out
    assert "opset import added for domain 'qonnx.custom_op.general'" in out
    assert "session loads" in out


def test_check_model_whose_session_fails(tmp_path, capsys):
    """Every node is a known op, but onnxruntime refuses the session: check says so and names the node."""
    x = np.zeros((1, 1, 4, 4), np.float32)
    model, _ = make_node_model(
        "Quant",
        "qonnx.custom_op.general",
        [x, np.float32(1), np.float32(0), np.float32(8)],
        const=[False, True, True, True],
    )
    # a float MaxPool whose pads reach the kernel: onnxruntime refuses it and no ortquant rewrite applies to float
    node = onnx.helper.make_node(
        "MaxPool", ["out0"], ["pooled"], name="bad_pool", kernel_shape=[2, 2], pads=[0, 0, 2, 2], strides=[2, 2]
    )
    model.graph.node.append(node)
    model.graph.output[0].name = "pooled"
    path = tmp_path / "bad.onnx"
    onnx.save(model, path)
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "ok  quant_node" in out  # the custom node itself is fine ...
    assert "session creation fails" in out  # ... but the truth is the session
    assert "NO  bad_pool    ai.onnx::MaxPool  onnxruntime refuses this node: Pad should be smaller than kernel." in out


def test_prepare_writes_a_model_plain_onnxruntime_loads(tmp_path, capsys):
    import onnxruntime as ort

    import ortquant

    path = _default_domain_quant(tmp_path)
    out = tmp_path / "prepared.onnx"
    assert main(["prepare", str(path), str(out)]) == 0
    assert "fix_legacy_domains" in capsys.readouterr().out
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    got = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"]).run(None, {"in0": x})[0]
    np.testing.assert_array_equal(got, np.clip(np.round(x / 0.5), -4, 3) * 0.5)


def test_prepare_keeps_external_data_external(tmp_path):
    import onnxruntime as ort

    import ortquant

    path = _default_domain_quant(tmp_path)
    model = onnx.load(path)
    w = np.arange(4096, dtype=np.float32).reshape(64, 64) / 4096
    model.graph.initializer.append(onnx.numpy_helper.from_array(w[:5].copy(), "w"))  # 5 x 64: a large one
    model.graph.node.append(onnx.helper.make_node("MatMul", ["out0", "w2"], ["mm0"], name="mm0"))
    model.graph.node.append(onnx.helper.make_node("MatMul", ["mm0", "w"], ["mm"], name="mm"))
    model.graph.initializer.append(onnx.numpy_helper.from_array(w[:3, :5].copy(), "w2"))
    model.graph.output[0].name = "mm"
    src = tmp_path / "src"
    src.mkdir()
    onnx.save(model, src / "m.onnx", save_as_external_data=True, location="m.bin", size_threshold=0)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert main(["prepare", str(src / "m.onnx"), str(out_dir / "p.onnx")]) == 0
    assert (out_dir / "p.onnx.data").exists()
    header = onnx.load(out_dir / "p.onnx", load_external_data=False)
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in header.graph.initializer)
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    x = np.ones((2, 3), np.float32)
    got = ort.InferenceSession(str(out_dir / "p.onnx"), so, providers=["CPUExecutionProvider"]).run(None, {"in0": x})
    assert_same = ortquant.InferenceSession(str(src / "m.onnx")).run(None, {"in0": x})
    np.testing.assert_array_equal(got[0], assert_same[0])


def test_check_integer_says_per_layer_which_path(capsys):
    from pathlib import Path

    models = Path(__file__).resolve().parents[1] / "models"
    assert main(["check", "--integer", str(models / "cnn_w4a4.onnx")]) == 0
    out = capsys.readouterr().out
    assert out.count("int   Conv_") == 3
    # the head reads a Trunc: no quantizer to fuse, but its output is on an integer grid, which the report names
    assert "int   Gemm_0" in out and "activation on the grid 0.0884651 * (q - 0), q in [0, 15]" in out
    assert "integer mode: 4 of 4 layer(s) on the integer path" in out


def test_run_and_bench_integer(capsys):
    from pathlib import Path

    model = Path(__file__).resolve().parents[1] / "models" / "mixed_bits.onnx"
    assert main(["run", str(model), "--random", "--integer"]) == 0
    assert main(["bench", str(model), "--integer", "--runs", "3", "--warmup", "1"]) == 0
    assert "median" in capsys.readouterr().out


def test_too_old_onnxruntime_is_one_line_not_an_internal_error(quant_model, monkeypatch, capsys):
    import onnxruntime

    path, _ = quant_model
    monkeypatch.setattr(onnxruntime, "__version__", "1.18.1")
    assert main(["run", str(path), "--random"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ortquant run: error: ortquant needs onnxruntime >= ") and err.count("\n") == 1, err
    assert "1.18.1" in err and "internal error" not in err


def test_prepare_batch_makes_a_fixed_batch_model_take_any_batch(tmp_path):
    """`ortquant prepare --batch dynamic` on RadioML VGG10 (batch 1 fixed, as published): batch 8 equals row by
    row."""
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "realworld" / "radioml_vgg10_w8a8.onnx"
    if not src.is_file():
        pytest.skip(f"{src} not present")
    assert onnx.load(str(src)).graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1
    out = tmp_path / "tfc_any_batch.onnx"
    assert main(["prepare", str(src), str(out), "--batch", "dynamic"]) == 0
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    sess = ort.InferenceSession(str(out), so, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    x = np.random.default_rng(3).random((8, *[d for d in inp.shape[1:]]), dtype=np.float32)
    whole = sess.run(None, {inp.name: x})[0]
    rows = np.concatenate([sess.run(None, {inp.name: x[i : i + 1]})[0] for i in range(8)])
    np.testing.assert_array_equal(whole, rows)
    assert main(["prepare", str(src), str(tmp_path / "bad.onnx"), "--batch", "zero"]) == 2


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_prepare_writes_a_file_others_can_read_as_a_new_file_would_be(tmp_path):
    """The model goes through a private temporary file (mode 0600); the written one has a new file's mode (0666
    less the umask), or the mode of the file it replaces, so a server running as another user can read it."""
    path = _default_domain_quant(tmp_path)
    out = tmp_path / "prepared.onnx"
    old = os.umask(0o022)
    try:
        assert main(["prepare", str(path), str(out)]) == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
        os.umask(0o027)
        other = tmp_path / "other.onnx"
        assert main(["prepare", str(path), str(other)]) == 0
        assert stat.S_IMODE(other.stat().st_mode) == 0o640
        out.chmod(0o604)
        assert main(["prepare", str(path), str(out)]) == 0  # replacing a file keeps its mode
        assert stat.S_IMODE(out.stat().st_mode) == 0o604
    finally:
        os.umask(old)
