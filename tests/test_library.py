"""The shipped library as a binary (exports, dependencies) and how onnxruntime treats all-constant nodes.

Decision 18: onnxruntime never constant-folds custom-op nodes, so a Quant whose inputs are all initializers (a
weight quantizer) is computed once when the kernel is created and only copied out per run.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ortquant
from conftest import IR_VERSION, assert_bitexact, make_node_model
from ortquant.reference import qonnx as ref

QONNX = "qonnx.custom_op.general"
REPO = Path(__file__).resolve().parents[1]
# The C entry points of libortquant.so. Adding one means updating csrc/ort/ortquant.ver and this set together.
EXPORTS = {"RegisterCustomOps", "RegisterOrtQuantOps", "OrtQuantVersion", "OrtQuantOpList"}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (binutils) is not installed")
    return path


def _lib() -> str:
    return ortquant.library_path()


def test_library_path_exists():
    path = Path(_lib())
    assert path.is_absolute() and path.is_file() and path.name == "libortquant.so"


def test_exports_only_the_entry_points():
    out = subprocess.run([_tool("nm"), "-D", "--defined-only", _lib()], capture_output=True, text=True, check=True)
    symbols = {line.split()[-1].split("@")[0] for line in out.stdout.splitlines() if line.strip()}
    # Nothing else: no C++ symbols of ours, and no weak template instantiations from the standard library.
    assert symbols == EXPORTS, sorted(symbols ^ EXPORTS)
    text_symbols = {
        line.split()[-1] for line in out.stdout.splitlines() if len(line.split()) == 3 and line.split()[1] == "T"
    }
    assert text_symbols == EXPORTS


def test_version_script_lists_the_same_symbols():
    ver = (REPO / "csrc" / "ort" / "ortquant.ver").read_text()
    glob = ver.split("global:")[1].split("local:")[0]
    assert set(re.findall(r"(\w+)\s*;", glob)) == EXPORTS


def test_no_dependency_on_onnxruntime():
    out = subprocess.run([_tool("readelf"), "-d", _lib()], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    assert needed, out  # the parse worked
    assert not [n for n in needed if "onnxruntime" in n], needed
    # Nor does it rely on onnxruntime's symbols being around: every OrtApi call goes through the table it is given.
    undefined = subprocess.run(
        [_tool("nm"), "-D", "--undefined-only", _lib()], capture_output=True, text=True, check=True
    ).stdout
    assert not re.search(r"\bOrt\w*", undefined), undefined
    # dlclose never unmaps it (onnxruntime threads or static destructors may still point into it).
    assert "NODELETE" in out


def test_native_version_matches_package():
    assert ortquant.native_version() == ortquant.__version__


# ---- all-constant nodes (decision 18) ---------------------------------------------------------------------


def _weight_model() -> tuple[onnx.ModelProto, np.ndarray, np.ndarray]:
    """y = x * Quant(w): a per-output-channel weight quantizer on initializers feeding a standard op."""
    w = np.linspace(-2, 2, 6 * 10, dtype=np.float32).reshape(6, 10)
    ws = np.linspace(0.05, 0.3, 6, dtype=np.float32).reshape(6, 1)
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(ws, "ws"),
        numpy_helper.from_array(np.float32(0), "z"),
        numpy_helper.from_array(np.float32(4), "b"),
    ]
    nodes = [
        helper.make_node("Quant", ["w", "ws", "z", "b"], ["wq"], domain=QONNX, name="wquant", signed=1, narrow=1),
        helper.make_node("Mul", ["x", "wq"], ["y"], name="mul"),
    ]
    graph = helper.make_graph(
        nodes,
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 10])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 10])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(QONNX, 1)])
    model.ir_version = IR_VERSION
    wq = ref.quant(w, ws, np.float32(0), np.float32(4), True, True, "ROUND")
    return model, w, wq


LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}


@pytest.mark.parametrize("level", list(LEVELS))
def test_constant_quant_feeding_a_standard_op(level):
    model, _, wq = _weight_model()
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    # exact=True keeps the Quant node (the default folds weight quantizers into initializers: issue 10)
    sess = ortquant.InferenceSession(model, sess_options=so, exact=True)
    x = np.linspace(-1, 1, 60, dtype=np.float32).reshape(6, 10)
    for _ in range(3):
        (y,) = sess.run(None, {"x": x})
        assert_bitexact(y, x * wq)


def test_constant_quant_output_is_a_fresh_copy_each_run():
    """The precomputed result is copied out; a caller writing into an output does not change later runs."""
    w = np.linspace(-2, 2, 40, dtype=np.float32)
    model, feeds = make_node_model("Quant", QONNX, [w, np.float32(0.25), np.float32(0), np.float32(3)], const=True)
    assert feeds == {}
    sess = ortquant.InferenceSession(model)
    want = ref.quant(w, np.float32(0.25), np.float32(0), np.float32(3))
    (y1,) = sess.run(None, {})
    assert_bitexact(y1, want)
    y1[:] = 1234.0
    (y2,) = sess.run(None, {})
    assert_bitexact(y2, want)


def test_constant_quant_is_computed_at_session_creation():
    """Timing-free evidence of compute-once: with every input constant, a bad value fails session creation
    (the kernel computed the node there); with a runtime x the same value only fails at run time."""
    x = np.ones(3, np.float32)
    params = [np.float32(1), np.float32(0), np.float32(0)]  # bitwidth 0 is invalid
    model, _ = make_node_model("Quant", QONNX, [x, *params], const=True)
    with pytest.raises(Exception, match=r"quant_node.*bitwidth") as e:
        ortquant.InferenceSession(model)
    assert "initialization" in str(e.value).lower()

    model, feeds = make_node_model("Quant", QONNX, [x, *params], const=[False, True, True, True])
    sess = ortquant.InferenceSession(model)  # creation succeeds: nothing to compute yet
    with pytest.raises(Exception, match=r"quant_node.*bitwidth"):
        sess.run(None, feeds)


def test_onnxruntime_does_not_fold_the_custom_node(tmp_path):
    """Decision 18 as observed: at ORT_ENABLE_ALL the saved optimized model still holds the Quant node (with its
    domain and opset import), the saved model runs, and profiling shows the node executing on every run."""
    model, _, wq = _weight_model()
    optimized = tmp_path / "optimized.onnx"
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.optimized_model_filepath = str(optimized)
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "profile")
    # exact=True keeps the Quant node (the default folds weight quantizers into initializers: issue 10)
    sess = ortquant.InferenceSession(model, sess_options=so, exact=True)
    x = np.linspace(-1, 1, 60, dtype=np.float32).reshape(6, 10)
    runs = 3
    for _ in range(runs):
        assert_bitexact(sess.run(None, {"x": x})[0], x * wq)
    profile = json.loads(Path(sess.end_profiling()).read_text())
    kernel_events = [e for e in profile if e.get("cat") == "Node" and e.get("name") == "wquant_kernel_time"]
    assert len(kernel_events) == runs, [e.get("name") for e in profile if e.get("cat") == "Node"]

    saved = onnx.load(optimized)
    quant_nodes = [n for n in saved.graph.node if n.op_type == "Quant"]
    assert len(quant_nodes) == 1 and quant_nodes[0].domain == QONNX
    assert QONNX in {o.domain for o in saved.opset_import}
    (y,) = ortquant.InferenceSession(optimized, exact=True).run(None, {"x": x})
    assert_bitexact(y, x * wq)


# docs/ops.md, "Default mode": what registering the library turns off
DEFAULT_DISABLED = "NchwcTransformer;ConvBNFusion;ConvMulFusion;MatMul_BatchNormalization_Fusion;MatMulScaleFusion"


def test_registration_disables_the_optimizations_that_reround_before_quantizers():
    """docs/ops.md, "Default mode": the library sets the list unless the caller already chose one."""
    import onnxruntime as ort

    key = "optimization.disable_specified_optimizers"
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())  # what a plain host does
    assert so.get_session_config_entry(key) == DEFAULT_DISABLED
    mine = ort.SessionOptions()
    mine.add_session_config_entry(key, "ConstantFolding")
    ortquant.register(mine)
    assert mine.get_session_config_entry(key) == "ConstantFolding"


def test_registration_turns_onnxruntime_s_qdq_fusions_off(tmp_path):
    """docs/ops.md, "Default mode": session.disable_quant_qdq = 1 unless the caller chose; then a QuantizeLinear ->
    DequantizeLinear -> Conv (DequantizeLinear weights) graph runs as written: no fused QLinearConv in onnxruntime's
    optimized graph, and the default mode's result is onnxruntime's unfused one bit for bit."""
    import onnxruntime as ort

    key = "session.disable_quant_qdq"
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    assert so.get_session_config_entry(key) == "1"
    mine = ort.SessionOptions()
    mine.add_session_config_entry(key, "0")
    ortquant.register(mine)
    assert mine.get_session_config_entry(key) == "0"

    rng = np.random.default_rng(3)
    w = rng.integers(-128, 128, (8, 6, 3, 3)).astype(np.int8)
    inits = [
        numpy_helper.from_array(np.float32(0.02), "xs"),
        numpy_helper.from_array(np.uint8(0), "xz"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.float32(0.01), "ws"),
        numpy_helper.from_array(np.int8(0), "wz"),
        numpy_helper.from_array(np.float32(0.05), "ys"),
        numpy_helper.from_array(np.uint8(0), "yz"),
    ]
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
        helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
        helper.make_node("Conv", ["xd", "wd"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("QuantizeLinear", ["r", "ys", "yz"], ["yq"]),
        helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"]),
    ]
    model = helper.make_model(
        helper.make_graph(
            nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6, 12, 12])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
        ),
        opset_imports=[helper.make_opsetid("", 13)],
    )  # fmt: skip
    model.ir_version = 10
    x = rng.uniform(0, 5.1, (1, 6, 12, 12)).astype(np.float32)  # codes up to 255: u8 x s8 pairs past int16
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    (want,) = ort.InferenceSession(model.SerializeToString(), plain, providers=["CPUExecutionProvider"]).run(
        None, {"x": x}
    )
    (got,) = ortquant.InferenceSession(model).run(None, {"x": x})
    assert_bitexact(got, want)
    # integer mode: exact sums where the unfused float Conv rounds its own, so values at a rounding boundary of the
    # output quantizer may take the neighbouring step (its contract), nothing more
    (got,) = ortquant.InferenceSession(model, integer=True).run(None, {"x": x})
    off = np.abs(got.astype(np.float64) - want)
    assert off.max() <= 0.05 * 1.001 and (off > 0).mean() < 0.01, (off.max(), (off > 0).mean())
    path = tmp_path / "optimized.onnx"
    opt = ortquant.register(ort.SessionOptions())
    opt.optimized_model_filepath = str(path)
    ort.InferenceSession(model.SerializeToString(), opt, providers=["CPUExecutionProvider"])
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert "Conv" in ops and not ops & {"QLinearConv", "ConvInteger"}, ops


def test_integer_sessions_keep_onnxruntime_s_optimizations_on():
    """Integer mode may re-round its float layers within its contract, so the NCHWc transformer and the folds stay
    on there (docs/ops.md, "Default mode"); a caller's own list, and options registered before, are kept."""
    import onnxruntime as ort

    key = "optimization.disable_specified_optimizers"
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("Relu", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )  # fmt: skip
    model.ir_version = 10
    cases = [(ort.SessionOptions(), True, ""), (ort.SessionOptions(), False, None)]
    mine = ort.SessionOptions()
    mine.add_session_config_entry(key, "ConstantFolding")
    cases.append((mine, True, "ConstantFolding"))
    registered = ortquant.register(ort.SessionOptions())
    cases.append((registered, True, DEFAULT_DISABLED))
    for so, integer, want in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # integer=True on a model without layers warns
            ortquant.InferenceSession(model, sess_options=so, integer=integer)
        assert so.get_session_config_entry(key) == (want if want is not None else DEFAULT_DISABLED), (
            integer,
            want,
        )
