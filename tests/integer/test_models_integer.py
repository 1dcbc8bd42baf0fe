"""Integer mode on the Brevitas models in models/: which layers it lowers, and how far its outputs are from qonnx's
float execution over 1,000 random inputs (docs/ops.md "Integer mode" has the figures).

qonnx's float execution is ortquant's ``exact=True`` session here: tests/models/test_brevitas_models.py checks that
it reproduces qonnx 1.0.0's stored outputs, and it runs 1,000 inputs in a second where qonnx's executor takes
minutes. The difference is measured in units of the output layer's step: the value of one accumulator unit of the
last (integer) layer, S[j] = s_act * s_w[j], so "2 steps" means the integer network's logit moved by two products
of the last quantized activation and weight.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import numpy_helper

import ortquant
from ortquant.transforms.lower_integer import integer_plan, lower_integer

MODELS = Path(__file__).resolve().parents[2] / "models"
N_INPUTS = 1000

# name -> (layers on the integer path, of all layers; bound on max |diff| in output steps; min argmax agreement)
EXPECT = {
    "cnn4c2f_w4a4": (6, 6, 40.0, 0.97),
    "resnet_mini_w6a6": (9, 9, 40.0, 0.97),
    "mixed_bits": (6, 6, 40.0, 0.97),
    "cnn_w4a4": (3, 4, None, 0.97),
    "int8_resblock": (2, 3, 40.0, 0.97),
    "binary_mlp": (2, 2, 0.0, 1.0),
}


def _session(model: onnx.ModelProto, **kw: bool) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ortquant.InferenceSession(model, sess_options=so, **kw)


def _output_step(lowered: onnx.ModelProto) -> np.ndarray | None:
    """S[j] of the integer op that writes the graph output, when one does."""
    out = lowered.graph.output[0].name
    node = next((n for n in lowered.graph.node if out in n.output), None)
    if node is None or node.domain != "ortquant.integer":
        return None
    inits = {t.name: t for t in lowered.graph.initializer}
    return numpy_helper.to_array(inits[node.input[2]])


def measure(name: str, n: int = N_INPUTS, seed: int = 0) -> dict[str, float]:
    """Max |integer - float| (absolute and in output steps) and argmax agreement over n random inputs."""
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    x = np.random.default_rng(seed).standard_normal((n, *shape)).astype(np.float32)
    iname = model.graph.input[0].name
    ref = _session(model, exact=True).run(None, {iname: x})[0]
    got = _session(model, integer=True).run(None, {iname: x})[0]
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    step = _output_step(lower_integer(model))
    steps = float(np.max(diff / step.reshape(1, -1))) if step is not None else float("nan")
    if name == "binary_mlp":  # two classes can tie exactly (+-1 x +-0.1 sums): compare the rows as sets
        agree = float(np.mean(np.all(np.isclose(got, ref, rtol=0, atol=1e-6), axis=1)))
    else:
        agree = float(np.mean(np.argmax(got, axis=1) == np.argmax(ref, axis=1)))
    return {"max_abs": float(diff.max()), "max_steps": steps, "argmax": agree, "out_range": float(np.abs(ref).max())}


@pytest.mark.parametrize("name", list(EXPECT))
def test_integer_mode_against_float_execution(name: str) -> None:
    n_int, n_all, max_steps, min_agree = EXPECT[name]
    plan = integer_plan(onnx.load(str(MODELS / f"{name}.onnx")))
    assert (sum(d.integer for d in plan), len(plan)) == (n_int, n_all), plan
    m = measure(name)
    assert m["argmax"] >= min_agree, m
    if max_steps is not None:
        assert m["max_steps"] <= max_steps, m
    assert np.isfinite(m["max_abs"]) and m["max_abs"] < 0.5 * m["out_range"], m


def test_stored_inputs_and_threads() -> None:
    """The stored batch-4 input: one and two intra-op threads give the same bits in integer mode."""
    model = onnx.load(str(MODELS / "cnn4c2f_w4a4.onnx"))
    x = np.load(MODELS / "cnn4c2f_w4a4.npz")["input_b4"]
    outs = []
    for threads in (1, 2):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        sess = ortquant.InferenceSession(model, sess_options=so, integer=True)
        outs.append(sess.run(None, {"global_in": x})[0])
    np.testing.assert_array_equal(outs[0], outs[1])


if __name__ == "__main__":  # prints the figures of docs/ops.md
    for model_name in EXPECT:
        print(model_name, measure(model_name))
