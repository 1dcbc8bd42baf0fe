"""Integer mode on the Brevitas models in models/: which layers it lowers, and how far its outputs are from qonnx's
float execution over 1,000 random inputs (docs/ops.md "Integer mode" has the figures).

qonnx's float execution is ortquant's ``exact=True`` session here: tests/models/test_brevitas_models.py checks that
it reproduces qonnx 1.0.0's stored outputs, and it runs 1,000 inputs in a second where qonnx's executor takes
minutes. The difference is measured in units of the last quantizer's step: the scale s_act of the activation
quantizer that feeds the output layer (one code of it). Where no hidden quantizer changes a level, the difference
is float rounding (a tiny fraction of a step); where the float path's rounding moves a hidden activation across a
quantization boundary, the output moves by a few steps.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import ortquant
from ortquant.transforms.lower_integer import integer_backend, integer_plan, lower_integer

MODELS = Path(__file__).resolve().parents[2] / "models"
N_INPUTS = 1000

# name -> (layers on the integer path, of all layers; bound on max |diff| in output steps; min argmax agreement)
# (measured on an AVX2 host, 1,000 inputs: max 0.33 steps (resnet_mini), argmax agreement 1.0 everywhere; the
# bounds leave room for another CPU's float summation order. cnn_w4a4's head reads a Trunc (on the grid path):
# absolute bound.)
EXPECT = {
    "cnn4c2f_w4a4": (6, 6, 1.0, 0.99),
    "resnet_mini_w6a6": (9, 9, 1.0, 0.99),
    "mixed_bits": (6, 6, 1.0, 0.99),
    "cnn_w4a4": (4, 4, None, 0.99),
    "int8_resblock": (2, 3, 1.0, 0.99),
    "binary_mlp": (2, 2, 1e-5, 1.0),
    "tfc_w1a1": (4, 4, None, 1.0),  # XNOR-popcount; the output is TensorNorm's (float ops): absolute bound
    "tfc_w1a2": (4, 4, None, 1.0),  # bit-serial (ternary activations)
    # q/k/v on the engine, q @ k^T and p @ v (two activations) float-exact; the output projection reads p @ v (on
    # no 8-bit grid): float; the head reads the mean over the 8 tokens of an 8-bit activation (ReduceMean: sums of 8
    # codes, two byte planes) (measured: max |diff| 6e-8 of an output range of 0.4 over the 1,000 inputs)
    "attn_w8a8": (6, 7, None, 1.0),
}


def _session(model: onnx.ModelProto, **kw: bool) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ortquant.InferenceSession(model, sess_options=so, **kw)


def _output_steps(lowered: onnx.ModelProto) -> tuple[float, np.ndarray] | None:
    """(s_act, S[j]) of the integer op that writes the graph output, when one does: the step of the last
    activation quantizer and the value of one accumulator unit per output."""
    out = lowered.graph.output[0].name
    node = next((n for n in lowered.graph.node if out in n.output), None)
    if node is None or node.domain != "ortquant.integer":
        return None
    inits = {t.name: t for t in lowered.graph.initializer}
    producer = {o: n for n in lowered.graph.node for o in n.output}
    if node.op_type == "Rescale":  # float-exact backend: QuantCodes -> Conv/MatMul -> Rescale(acc, S, B)
        s_name, node = node.input[1], producer[producer[node.input[0]].input[0]]
    else:
        s_name = node.input[2]
    act = next(a.f for a in node.attribute if a.name == "act_scale")
    return float(act), numpy_helper.to_array(inits[s_name])


def measure(name: str, n: int = N_INPUTS, seed: int = 0) -> dict[str, float]:
    """Max |integer - float| (absolute and in output steps) and argmax agreement over n random inputs."""
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    x = np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)
    iname = model.graph.input[0].name
    ref = _session(model, exact=True).run(None, {iname: x})[0]
    got = _session(model, integer=True).run(None, {iname: x})[0]
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    steps = _output_steps(lower_integer(model))
    act_steps = float(diff.max() / steps[0]) if steps is not None else float("nan")
    acc_units = float(np.max(diff / steps[1].reshape(1, -1))) if steps is not None else float("nan")
    if name == "binary_mlp":  # two classes can tie exactly (+-1 x +-0.1 sums): compare the rows as sets
        agree = float(np.mean(np.all(np.isclose(got, ref, rtol=0, atol=1e-6), axis=1)))
    else:
        agree = float(np.mean(np.argmax(got, axis=1) == np.argmax(ref, axis=1)))
    return {
        "max_abs": float(diff.max()),
        "max_steps": act_steps,
        "max_acc_units": acc_units,
        "argmax": agree,
        "out_range": float(np.abs(ref).max()),
    }


@pytest.mark.parametrize("name", list(EXPECT))
def test_integer_mode_against_float_execution(name: str) -> None:
    n_int, n_all, max_steps, min_agree = EXPECT[name]
    if name == "int8_resblock" and integer_backend() != "engine":
        n_int = 3  # its shifted-uint8 weight codes (|q - z| up to 130) only fit the float-exact backend
    plan = integer_plan(onnx.load(str(MODELS / f"{name}.onnx")))
    assert (sum(d.integer for d in plan), len(plan)) == (n_int, n_all), plan
    m = measure(name)
    assert m["argmax"] >= min_agree, m
    if max_steps is not None:
        assert m["max_steps"] <= max_steps, m
    else:
        assert m["max_abs"] <= 0.02 * m["out_range"], m


@pytest.mark.parametrize("name", list(EXPECT))
def test_engine_and_float_exact_backends_give_the_same_bits(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two backends of integer mode compute the same exact sums and the same rescale: identical outputs."""
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    x = np.load(MODELS / f"{name}.npz")["input_b4"]
    iname = model.graph.input[0].name
    outs, lowered = {}, {}
    for backend in ("engine", "float"):
        monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", backend)
        outs[backend] = _session(model, integer=True).run(None, {iname: x})[0]
        lowered[backend] = sum(d.integer for d in integer_plan(model))
    if lowered["engine"] == lowered["float"]:
        np.testing.assert_array_equal(outs["engine"].view(np.uint32), outs["float"].view(np.uint32))
    else:  # layers integer only on the float-exact backend: int8_resblock's weight codes beyond int8, attn_w8a8's
        # products of two activations (ORTQUANT_INTEGER_BACKEND=engine leaves them to onnxruntime's float MatMul)
        assert lowered == dict(zip(("engine", "float"), ONLY_FLOAT_EXACT[name], strict=True)), lowered
        np.testing.assert_allclose(outs["engine"], outs["float"], rtol=0, atol=1e-2 * np.abs(outs["float"]).max())


# name -> layers on the integer path with ORTQUANT_INTEGER_BACKEND=engine and =float, where they differ
ONLY_FLOAT_EXACT = {"int8_resblock": (2, 3), "attn_w8a8": (4, 6)}


@pytest.mark.parametrize("name", ["cnn4c2f_w4a4", "resnet_mini_w6a6", "cnn_w4a4", "mixed_bits"])
def test_stored_inputs_and_threads(name: str) -> None:
    """The stored batch-4 input: one, two and three intra-op threads give the same bits in integer mode (a batch is
    split into ranges of images of at least 2^22 multiply-adds, one task each: single images in cnn4c2f's large
    layers, pairs in resnet_mini's and cnn_w4a4's, none in mixed_bits'; three threads take four tasks unevenly; the
    residual block, the fused max pools and the codes between layers too), with and without spinning threads."""
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    x = np.load(MODELS / f"{name}.npz")["input_b4"]
    outs = []
    for threads, spin in ((1, "1"), (2, "1"), (3, "0")):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.add_session_config_entry("session.intra_op.allow_spinning", spin)
        sess = ortquant.InferenceSession(model, sess_options=so, integer=True)
        outs.append(sess.run(None, {"global_in": x})[0])
        outs.append(sess.run(None, {"global_in": x[:1]})[0])
    for i in (2, 4):
        np.testing.assert_array_equal(outs[0], outs[i])
        np.testing.assert_array_equal(outs[1], outs[i + 1])
    np.testing.assert_array_equal(outs[1], outs[0][:1])  # the first image alone: the same bits as in the batch


if __name__ == "__main__":  # prints the figures of docs/ops.md
    for model_name in EXPECT:
        print(model_name, measure(model_name))


_ISA_SCRIPT = """
import sys, numpy as np, onnx, onnxruntime as ort, ortquant
model = onnx.load(sys.argv[1])
x = np.load(sys.argv[2])["input_b4"]
so = ort.SessionOptions()
so.intra_op_num_threads = 1
y = ortquant.InferenceSession(model, sess_options=so, integer=True).run(None, {model.graph.input[0].name: x})[0]
np.save(sys.argv[3], y)
"""


@pytest.mark.parametrize("backend", ["engine", "float", "mixed"])
def test_same_bits_on_every_isa_through_onnxruntime(backend: str, tmp_path: Path) -> None:
    """ORTQUANT_ISA set to each path this build runs, in fresh processes: identical bits."""
    import os
    import subprocess
    import sys

    outs = []
    for isa in ortquant.kernels.supported_isas():
        env = {**os.environ, "ORTQUANT_ISA": isa, "ORTQUANT_INTEGER_BACKEND": backend}
        out = tmp_path / f"{isa}.npy"
        args = [str(MODELS / "mixed_bits.onnx"), str(MODELS / "mixed_bits.npz"), str(out)]
        subprocess.run([sys.executable, "-c", _ISA_SCRIPT, *args], env=env, check=True)
        outs.append(np.load(out))
    for o in outs[1:]:
        np.testing.assert_array_equal(o.view(np.uint32), outs[0].view(np.uint32))
