"""``ortquant.InferenceSession`` and ``prepare_model`` as a user's fresh process calls them: keywords are checked
(a typo raises instead of being dropped by onnxruntime), files that are not models raise one-line ``ModelError``s
naming the file, an unknown op says what ortquant supports, and integer mode says when it lowers nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
CNN = REPO / "models" / "cnn_w4a4.onnx"
QONNX = "qonnx.custom_op.general"


def fresh(code: str, cwd: Path) -> dict:
    """Run ``code`` in a new interpreter (only ``import ortquant`` done for it); it prints one JSON object."""
    env = dict(os.environ)
    parts = env.get("PYTHONPATH", "").split(os.pathsep)
    if env.get("ORTQUANT_TEST_INSTALLED") != "1" and str(REPO / "python") not in parts:
        parts.insert(0, str(REPO / "python"))  # the developer build (the installed wheel under ORTQUANT_TEST_INSTALLED)
    env["PYTHONPATH"] = os.pathsep.join(p for p in parts if p)
    env.setdefault("ORTQUANT_BUILD_DIR", str(REPO / "build"))
    prelude = "import json, sys, warnings\nimport numpy as np\nimport ortquant\n"
    r = subprocess.run(
        [sys.executable, "-c", prelude + ERROR + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


ERROR = """
def error(fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except Exception as e:
        return {"type": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__], "message": str(e)}
    return None
"""


def _quant_model(path: Path) -> Path:
    inits = [numpy_helper.from_array(np.float32(v), n) for n, v in (("s", 0.5), ("z", 0), ("b", 3))]
    node = helper.make_node("Quant", ["x", "s", "z", "b"], ["y"], domain=QONNX, name="act_quant")
    vi = helper.make_tensor_value_info
    graph = helper.make_graph([node], "g", [vi("x", 1, [2, 3])], [vi("y", 1, [2, 3])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 1)])
    model.ir_version = 10
    onnx.save(model, path)
    return path


def test_a_misspelled_keyword_raises_type_error(tmp_path):
    got = fresh(
        f"""
        print(json.dumps(error(ortquant.InferenceSession, {str(CNN)!r}, interger=True)))
        """,
        tmp_path,
    )
    assert got is not None and got["type"] == "TypeError"
    assert "'interger'" in got["message"] and "did you mean 'integer'" in got["message"]


def test_onnxruntimes_own_keywords_are_accepted_and_passed_on(tmp_path):
    got = fresh(
        f"""
        x = np.zeros((1, 3, 32, 32), np.float32)
        path = {str(CNN)!r}
        plain = ortquant.InferenceSession(path)
        sess = ortquant.InferenceSession(
            path, None, ["CPUExecutionProvider"], [{{}}],
            enable_fallback=0, read_config_from_model=0, disabled_optimizers=["ConstantFolding"],
        )
        same = bool((sess.run(None, {{"global_in": x}})[0] == plain.run(None, {{"global_in": x}})[0]).all())
        print(json.dumps({{"same": same, "fallback": sess._enable_fallback, "providers": sess.get_providers()}}))
        """,
        tmp_path,
    )
    assert got == {"same": True, "fallback": False, "providers": ["CPUExecutionProvider"]}


def test_the_return_type_is_onnxruntimes_session():
    import inspect

    import ortquant

    assert inspect.signature(ortquant.InferenceSession).return_annotation == "onnxruntime.InferenceSession"


def test_files_that_are_not_models_raise_model_error_naming_the_file(tmp_path):
    (tmp_path / "empty.onnx").write_bytes(b"")
    (tmp_path / "text.onnx").write_text("not a model\n")
    data = CNN.read_bytes()
    (tmp_path / "truncated.onnx").write_bytes(data[: len(data) // 3])
    _quant_model(tmp_path / "q.onnx")  # its scale "s" (node input, initializer) becomes the byte 0xe6, not UTF-8
    (tmp_path / "bad_utf8.onnx").write_bytes((tmp_path / "q.onnx").read_bytes().replace(b"\n\x01s", b"\n\x01\xe6"))
    got = fresh(
        """
        cases = {
            "missing": (ortquant.InferenceSession, "missing.onnx"),
            "empty": (ortquant.InferenceSession, "empty.onnx"),
            "text": (ortquant.InferenceSession, "text.onnx"),
            "truncated": (ortquant.InferenceSession, "truncated.onnx"),
            "prepare_empty": (ortquant.prepare_model, "empty.onnx"),
            "prepare_truncated": (ortquant.prepare_model, "truncated.onnx"),
            "bytes_empty": (ortquant.prepare_model, b""),
            "bytes_cut": (ortquant.InferenceSession, open("truncated.onnx", "rb").read()),
            "bad_utf8": (ortquant.InferenceSession, "bad_utf8.onnx"),
        }
        print(json.dumps({k: error(fn, arg) for k, (fn, arg) in cases.items()}))
        """,
        tmp_path,
    )
    expected = {
        "missing": ("missing.onnx", "no such file"),
        "empty": ("empty.onnx", "empty (0 bytes)"),
        "text": ("text.onnx", "not an ONNX model"),
        "truncated": ("truncated.onnx", "cut off"),
        "prepare_empty": ("empty.onnx", "empty (0 bytes)"),
        "prepare_truncated": ("truncated.onnx", "cut off"),
        "bytes_empty": ("the model bytes", "empty (0 bytes)"),
        "bytes_cut": ("the model bytes", "cut off"),
        "bad_utf8": ("bad_utf8.onnx", "a string field is not UTF-8: input b'\\xe6'"),
    }
    for case, (name, cause) in expected.items():
        e = got[case]
        assert e is not None, case
        assert e["type"] == "ModelError" and "ValueError" in e["mro"], (case, e)
        assert e["message"].startswith(name) and cause in e["message"] and "\n" not in e["message"], (case, e)


def test_an_unknown_op_names_the_node_and_what_ortquant_supports(tmp_path):
    vi = helper.make_tensor_value_info
    node = helper.make_node("FancyQuant", ["x"], ["y"], domain=QONNX)  # unnamed: its output names it
    graph = helper.make_graph([node], "g", [vi("x", 1, [3])], [vi("y", 1, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 1)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "fancy.onnx")
    got = fresh("print(json.dumps(error(ortquant.InferenceSession, 'fancy.onnx')))", tmp_path)
    assert got is not None and got["type"] == "Fail"  # onnxruntime's exception type, kept
    msg = got["message"]
    assert "is not a registered function/op" in msg and "(node 'y')" in msg
    assert "ortquant's domain qonnx.custom_op.general has no op FancyQuant; it has" in msg and "Trunc" in msg


def test_input_types_no_kernel_takes_are_named(tmp_path):
    # a Trunc whose X is float32 and whose parameters are float16 (a Brevitas export after model.half()): onnxruntime
    # says no kernel matches; the message then names the node's input types
    vi = helper.make_tensor_value_info
    inits = [
        numpy_helper.from_array(np.array(v, np.float16), n)
        for n, v in [("s", 0.5), ("z", 0.0), ("ib", 8.0), ("os", 2.0), ("ob", 4.0)]
    ]
    node = helper.make_node("Trunc", ["x", "s", "z", "ib", "os", "ob"], ["y"], name="trunc", domain=QONNX)
    graph = helper.make_graph([node], "g", [vi("x", 1, [3])], [vi("y", 1, [3])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(QONNX, 2)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "trunc16.onnx")
    got = fresh("print(json.dumps(error(ortquant.InferenceSession, 'trunc16.onnx')))", tmp_path)
    assert got is not None and got["type"] == "Fail"  # onnxruntime's exception type, kept
    msg = got["message"]
    assert "no kernel def matches node inputs for Op: Trunc" in msg, msg
    assert "(its inputs: x float32, s float16, z float16, ib float16, os float16, ob float16;" in msg, msg
    assert "docs/ops.md, 'Trunc'" in msg and "\n" not in msg, msg


def test_integer_mode_that_lowers_nothing_warns(tmp_path):
    path = _quant_model(tmp_path / "q.onnx")  # no Conv/MatMul/Gemm layer
    got = fresh(
        f"""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            ortquant.InferenceSession({str(path)!r}, integer=True)
            ortquant.InferenceSession({str(CNN)!r}, integer=True)  # lowers three layers: no warning
            ortquant.InferenceSession({str(path)!r})  # not asked for integer mode: no warning
            lowered = ortquant.prepare_model({str(CNN)!r}, integer=True)
            ortquant.InferenceSession(lowered, integer=True)  # lowered before: no warning
        print(json.dumps([(w.category.__name__, str(w.message), w.filename) for w in caught]))
        """,
        tmp_path,
    )
    assert len(got) == 1, got
    category, message, filename = got[0]
    assert category == "RuntimeWarning" and filename == "<string>"  # attributed to the caller's line
    assert str(path) in message and f"ortquant check --integer {path}" in message


def test_an_op_missing_from_the_imported_opset_names_the_unnamed_node(tmp_path):
    vi = helper.make_tensor_value_info
    node = helper.make_node("Gelu", ["x"], ["y"])  # Gelu is in ai.onnx from opset 20; the model imports 13
    graph = helper.make_graph([node], "g", [vi("x", 1, [3])], [vi("y", 1, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 10
    onnx.save(model, tmp_path / "gelu.onnx")
    got = fresh("print(json.dumps(error(ortquant.InferenceSession, 'gelu.onnx')))", tmp_path)
    assert got is not None and got["type"] == "InvalidGraph"
    assert "No Op registered for Gelu" in got["message"]
    assert got["message"].endswith("(the unnamed ai.onnx::Gelu node computing 'y')")
