"""Integer mode's channels-last output (``transforms/integer_channels_last.py``, QConv's ``channels_last``): a
Transpose [0, 2, 3, 1] right after a QConv is fused into it. A Transpose moves values, so the expected outputs are
the same model prepared by every other step of the pipeline (onnxruntime's Transpose on QConv's NCHW output), bit
for bit, on every path the op takes to write its output: whole images, bands of rows, depthwise bands, a fused
LeakyRelu, a binary-weight layer (the bit kernels), several images."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import prepared_without, registered_session
from onnx import TensorProto, helper

import ortquant

Q = "qonnx.custom_op.general"


def _model(c: int, h: int, w: int, m: int, *, k: int = 3, group: int = 1, leaky: bool = False, binary: bool = False,
           perm: tuple[int, ...] = (0, 2, 3, 1), extra_reader: bool = False,
           pow2: bool = False) -> onnx.ModelProto:  # fmt: skip
    rng = np.random.default_rng(c * 100 + m)
    wt = (rng.standard_normal((m, c // group, k, k)) * 0.4).astype(np.float32)
    bits = 1.0 if binary else 4.0
    # pow2: power-of-two weight scales (QKeras): the rescale runs in float32 (Exact32)
    ws = 2.0 ** rng.integers(-6, -3, (m, 1, 1, 1)) if pow2 else 0.02 + rng.random((m, 1, 1, 1)) * 0.05
    inits = [
        _init("as", 0.0625), _init("az", 0.0), _init("ab", 1.0 if binary else 4.0),
        _init("w", np.sign(wt) if binary else wt),
        _init("ws", 0.03 if binary else ws),
        _init("wz", 0.0), _init("wb", bits), _init("cb", (rng.standard_normal(m) * 0.2).astype(np.float32)),
    ]  # fmt: skip
    if binary:
        nodes = [
            helper.make_node("BipolarQuant", ["x", "as"], ["xq"], domain=Q),
            helper.make_node("BipolarQuant", ["w", "ws"], ["wq"], domain=Q),
        ]
    else:
        nodes = [
            helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], domain=Q, signed=1, narrow=0),
            helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], domain=Q, signed=1, narrow=1),
        ]
    nodes.append(
        helper.make_node("Conv", ["xq", "wq", "cb"], ["c"], pads=[k // 2] * 4, kernel_shape=[k, k], group=group)
    )
    out = "c"
    if leaky:
        nodes.append(helper.make_node("LeakyRelu", ["c"], ["l"], alpha=0.1015625))
        out = "l"
    nodes.append(helper.make_node("Transpose", [out], ["y"], perm=list(perm)))
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", [out], ["r"]))
        outs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, h, w])], outs,
                          initializer=inits)  # fmt: skip
    mp = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    mp.ir_version = 10
    return mp


def _same_bits(m: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    prepared = ortquant.prepare_model(m, integer=True)
    dims = [d.dim_value for d in m.graph.input[0].type.tensor_type.shape.dim[1:]]
    x = (np.random.default_rng(5).standard_normal((batch, *dims)) * 0.5).astype(np.float32)
    want = registered_session(prepared_without(m, "fuse_integer_channels_last")).run(None, {"x": x})
    got = registered_session(prepared).run(None, {"x": x})
    api = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})
    for g, a, w in zip(got, api, want, strict=True):
        assert g.shape == w.shape
        np.testing.assert_array_equal(g.view(np.uint32), w.view(np.uint32))
        np.testing.assert_array_equal(a.view(np.uint32), w.view(np.uint32))
    return prepared


CASES = {
    "whole-image": (dict(c=8, h=9, w=10, m=16), 2),
    "bands": (dict(c=4, h=130, w=128, m=16, k=1), 1),  # > 1 MiB of sums: bands of rows
    "quad-bands": (dict(c=8, h=100, w=140, m=24), 1),
    "depthwise-bands": (dict(c=16, h=100, w=96, m=16, group=16), 1),
    "leaky": (dict(c=8, h=12, w=20, m=8, leaky=True), 3),
    "binary": (dict(c=64, h=6, w=7, m=8, binary=True), 2),
    "wide-rows": (dict(c=4, h=2, w=2500, m=8, k=1), 1),
    # The channels-last store's shapes: 8-channel transposes with a tail of channels and of pixels, a pair of
    # channels (whole pixels interleaved), groups (each group's channels at an offset in the pixel).
    "twelve-channels": (dict(c=8, h=7, w=29, m=12), 2),
    "two-channels": (dict(c=4, h=9, w=37, m=2, k=1), 1),
    "two-channels-leaky": (dict(c=4, h=20, w=600, m=2, k=1, leaky=True), 1),
    "groups": (dict(c=8, h=10, w=21, m=16, group=2), 2),
    "pow2-scales": (dict(c=8, h=9, w=37, m=16, pow2=True), 2),
    "pow2-scales-bands": (dict(c=4, h=130, w=128, m=16, k=1, pow2=True), 1),
    # 16-channel transposes (AVX-512): two lines a pixel, streamed (over 1 MiB an image) with a tail of pixels; and
    # 16 + 8 channels, not streamed.
    "thirty-two-channels-streamed": (dict(c=4, h=65, w=131, m=32, k=1), 2),
    "twenty-four-channels": (dict(c=8, h=5, w=23, m=24), 1),
}


@pytest.mark.parametrize("case", CASES)
def test_channels_last_output_keeps_the_bits(case: str) -> None:
    kw, batch = CASES[case]
    prepared = _same_bits(_model(**kw), batch)
    ops = [n.op_type for n in prepared.graph.node]
    assert "Transpose" not in ops
    conv = next(n for n in prepared.graph.node if n.op_type == "QConv")
    assert any(a.name == "channels_last" and a.i == 1 for a in conv.attribute)


@pytest.mark.parametrize(
    "kw", [dict(perm=(0, 3, 1, 2)), dict(extra_reader=True)], ids=["other-permutation", "conv-output-read-elsewhere"]
)
def test_other_transposes_stay(kw: dict) -> None:
    prepared = _same_bits(_model(8, 6, 6, 8, **kw), 1)
    assert "Transpose" in [n.op_type for n in prepared.graph.node]


def test_channels_last_with_output_codes_is_an_error() -> None:
    m = ortquant.prepare_model(_model(8, 6, 6, 8), integer=True)
    conv = next(n for n in m.graph.node if n.op_type == "QConv")
    conv.op_type = "QConvCodes"
    conv.attribute.append(helper.make_attribute("out_act_scale", 0.5))
    m.graph.output[0].type.tensor_type.elem_type = TensorProto.INT8
    with pytest.raises(Exception, match="channels_last"):
        registered_session(m)


_PATH_SCRIPT = """
import sys
sys.path.insert(0, sys.argv[1])
import test_integer_channels_last as t
for case in sys.argv[2:]:
    kw, batch = t.CASES[case]
    t._same_bits(t._model(**kw), batch)
print("ok")
"""


@pytest.mark.parametrize("isa", ortquant.kernels.supported_isas())
def test_channels_last_store_on_every_path(isa: str) -> None:
    """The store's shapes (16-channel transposes streamed or not, 8-channel ones, the pair interleave, pixel tails)
    with the op library on each ISA path (ORTQUANT_ISA in a fresh process: the store is per ISA)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    cases = ["whole-image", "bands", "twelve-channels", "two-channels", "thirty-two-channels-streamed",
             "twenty-four-channels"]  # fmt: skip
    env = {**os.environ, "ORTQUANT_ISA": isa}
    run = subprocess.run([sys.executable, "-c", _PATH_SCRIPT, str(Path(__file__).resolve().parent), *cases],
                         capture_output=True, text=True, env=env, timeout=600, check=False)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
