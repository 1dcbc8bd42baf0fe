"""float64 / int64 parameter inputs of the QONNX ops (models from qonnx's QKeras/hls4ml converter).

qonnx computes with numpy: a float32 X divided by a float64 scale is a float64 step (NEP 50), so everything from
the first float64 operand on runs in float64; Quant casts the result to float32, BipolarQuant returns float64
(ortquant returns it rounded to float32: docs/ops.md, "float64 and int64 parameters"). MultiThreshold compares
float32 X with float64 thresholds exactly. Every case is compared bit for bit with qonnx 1.0.0's own execute_node
on the same arrays (runtime inputs and initializers), and end to end through execute_onnx on a QKeras-like model.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import IR_VERSION, ORT_ERRORS, SPECIAL_F32, assert_bitexact, make_node_model, run_model
from ortquant import kernels

if HAVE_QONNX:
    from qonnx.custom_op.general.trunc import trunc_v1 as qonnx_trunc_v1
    from qonnx.custom_op.general.trunc import trunc_v2 as qonnx_trunc_v2

needs_qonnx = pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")

DOMAIN = "qonnx.custom_op.general"
MODES = ["ROUND", "CEIL", "FLOOR", "UP", "DOWN", "HALF_UP", "HALF_DOWN"]
F32, F64 = np.float32, np.float64


def _x(rng: np.random.Generator, shape: tuple[int, ...], dtype: type = F32) -> np.ndarray:
    x = (rng.standard_normal(shape) * 40).astype(dtype)
    flat = x.reshape(-1)
    specials = SPECIAL_F32.astype(dtype)
    flat[: min(flat.size, specials.size)] = specials[: min(flat.size, specials.size)]
    # values whose float64 quotient by 0.1 lies within float32 rounding of a .5 tie: float32 and float64 differ
    flat[-4:] = np.array([0.25, 0.35, -0.45, 12.75], dtype)
    return x


@needs_qonnx
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtypes", [c for c in itertools.product([F32, F64], repeat=3) if F64 in c])
@pytest.mark.parametrize("bw_dtype", [F32, F64, np.int64, np.int32])
def test_quant_wide_params_match_qonnx(mode, dtypes, bw_dtype):
    rng = np.random.default_rng(zlib.crc32(repr((mode, dtypes, bw_dtype)).encode()))
    xd, sd, zd = dtypes
    x = _x(rng, (2, 3, 4, 5), xd)
    scale = np.array([0.1, 0.3, 0.07], sd).reshape(1, 3, 1, 1)  # not float32-representable: float64 matters
    zeropt = np.array([0.0, 1.0, -2.0], zd).reshape(1, 3, 1, 1)
    for signed, narrow, bits in [(1, 0, 4), (1, 1, 8), (0, 0, 3), (0, 1, 2), (1, 0, 1)]:
        bw = np.array(bits, bw_dtype)
        attrs = {"signed": signed, "narrow": narrow, "rounding_mode": mode}
        for const in (False, True):
            model, feeds = make_node_model(
                "Quant", DOMAIN, [x, scale, zeropt, bw], const=[False, const, const, const], attrs=attrs
            )
            got = run_model(model, feeds)[0]
            want = qonnx_execute(qonnx_node("Quant", 4, **attrs), [x, scale, zeropt, bw])
            assert want.dtype == F32  # qonnx casts Quant's result
            assert_bitexact(got, want)


@needs_qonnx
def test_quant_float64_differs_from_float32_math():
    """The float64 path is really float64: the same values as float32 parameters give a different answer."""
    x = np.array([0.35, 0.45, 0.25, 1.05], F32)
    s64 = np.array(0.1, F64)
    z = np.array(0.0, F32)
    bw = np.array(8.0, F32)
    attrs = {"signed": 1, "narrow": 0, "rounding_mode": "ROUND"}
    model, feeds = make_node_model("Quant", DOMAIN, [x, s64, z, bw], attrs=attrs)
    got = run_model(model, feeds)[0]
    assert_bitexact(got, qonnx_execute(qonnx_node("Quant", 4, **attrs), [x, s64, z, bw]))
    model32, feeds32 = make_node_model("Quant", DOMAIN, [x, s64.astype(F32), z, bw], attrs=attrs)
    assert not np.array_equal(run_model(model32, feeds32)[0], got)


@needs_qonnx
@pytest.mark.parametrize("bits", [3.5, 7.25, 24.0, 30.0])
def test_quant_float64_bitwidth_bounds(bits):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(500) * 2.0**bits).astype(F32)
    for signed, narrow in itertools.product([0, 1], [0, 1]):
        attrs = {"signed": signed, "narrow": narrow, "rounding_mode": "FLOOR"}
        ins = [x, np.array(1.0, F32), np.array(0.0, F32), np.array(bits, F64)]
        model, feeds = make_node_model("Quant", DOMAIN, ins, attrs=attrs)
        assert_bitexact(run_model(model, feeds)[0], qonnx_execute(qonnx_node("Quant", 4, **attrs), ins))


@needs_qonnx
@pytest.mark.parametrize(
    "scale", [2.0**-8, 0.5, 2.0**10, 2.0**-126, 2.0**-127, 2.0**-149, 2.0**-1030, 2.0**127, 0.1, 3.0, 1e-300]
)
@pytest.mark.parametrize("sdtype,zdtype", [(F64, F32), (F64, F64), (F32, F64)])
@pytest.mark.parametrize("signed,bits", [(0, 16), (1, 8), (1, 4), (0, 51), (1, 52), (0, 53), (1, 62)])
def test_quant_wide_row_path_matches_qonnx(scale, sdtype, zdtype, signed, bits):
    """Long float32 rows with one float64 scale / zero point (QKeras activations): the row path divides by a
    power-of-two scale as a multiplication and rounds without a library call, bit for bit as qonnx. Ties, signed
    zeros, infinities, NaN and values past the bounds; bit widths on both sides of 2^51."""
    s = np.array(scale, sdtype)
    if not np.isfinite(s) or s == 0:
        pytest.skip("the scale is not representable in this dtype")
    rng = np.random.default_rng(zlib.crc32(repr((scale, sdtype, zdtype, signed, bits)).encode()))
    k = rng.integers(-(2**20), 2**20, 1200).astype(np.float64)
    with np.errstate(all="ignore"):  # huge scales overflow float32 on purpose (inf inputs)
        ties = ((k + 0.5) * float(s)).astype(F32)  # exact halves of the grid where float32 can hold them
        x = np.concatenate([ties, (rng.standard_normal(1200) * 2.0 ** min(bits, 30) * float(s)).astype(F32)])
        x[:8] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -0.3 * float(s), 0.3 * float(s), -0.5 * float(s)], F32)
    x = x.reshape(2, 3, 400)
    zero = np.array(1.0 if bits < 30 else 0.0, zdtype)
    attrs = {"signed": signed, "narrow": 0, "rounding_mode": "ROUND"}
    ins = [x, s, zero, np.array(bits, np.int64)]
    model, feeds = make_node_model("Quant", DOMAIN, ins, const=[False, True, True, True], attrs=attrs)
    with np.errstate(all="ignore"):
        want = qonnx_execute(qonnx_node("Quant", 4, **attrs), ins)
    assert_bitexact(run_model(model, feeds)[0], want)


_ROW_SCRIPT = r"""
import sys
import numpy as np
sys.path.insert(0, sys.argv[1])
from conftest import make_node_model, run_model
cases = np.load(sys.argv[2])
out = {}
for key in sorted(k for k in cases.files if k.startswith("x")):
    i = key[1:]
    ins = [cases["x" + i], cases["s" + i], cases["z" + i], cases["b" + i]]
    attrs = {"signed": int(cases["signed" + i]), "narrow": 0, "rounding_mode": "ROUND"}
    model, feeds = make_node_model("Quant", "qonnx.custom_op.general", ins, const=[False, True, True, True],
                                   attrs=attrs)
    out["y" + i] = run_model(model, feeds)[0]
np.savez(sys.argv[3], **out)
print("ok")
"""


@needs_qonnx
@pytest.mark.parametrize("isa", kernels.supported_isas())
def test_quant_wide_row_loop_on_every_path(isa, tmp_path):
    """The float64-parameter ROUND row loop is compiled per ISA (wide_quant_impl.inc, vectorized): run with the op
    library on each path (ORTQUANT_ISA, a fresh process), bit for bit as qonnx. Power-of-two scales (the division
    as a multiplication) and others, float32 and float64 divisions, ties, signed zeros, infinities, NaN, values
    past the bounds, rows of every length around the vector widths."""
    rng = np.random.default_rng(77)
    cases: dict[str, np.ndarray] = {}
    want: dict[str, np.ndarray] = {}
    combos = [(2.0**-8, F64, F32, 0, 16), (0.1, F64, F64, 1, 8), (2.0**-3, F32, F64, 1, 4), (3.0, F64, F32, 0, 51)]
    combos += [(s, sd, zd, sg, b) for (s, sd, zd, sg, b) in combos]  # again, at other lengths
    for i, (scale, sdtype, zdtype, signed, bits) in enumerate(combos):
        s = np.array(scale, sdtype)
        n = [1, 7, 8, 9, 15, 16, 17, 1000][i] + (0 if i < 4 else 64)
        k = rng.integers(-(2 ** min(bits, 20)), 2 ** min(bits, 20), n).astype(np.float64)
        x = ((k + 0.5) * float(s)).astype(F32)
        x[::2] = (rng.standard_normal(x[::2].size) * 2.0 ** min(bits, 30) * float(s)).astype(F32)
        x[: min(n, 6)] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -0.3 * float(s)], F32)[: min(n, 6)]
        ins = [x.reshape(1, n), s, np.array(1.0 if bits < 30 else 0.0, zdtype), np.array(bits, np.int64)]
        for name, v in zip(("x", "s", "z", "b"), ins, strict=True):
            cases[f"{name}{i}"] = v
        cases[f"signed{i}"] = np.array(signed)
        attrs = {"signed": signed, "narrow": 0, "rounding_mode": "ROUND"}
        with np.errstate(all="ignore"):
            want[f"y{i}"] = qonnx_execute(qonnx_node("Quant", 4, **attrs), ins)
    np.savez(tmp_path / "cases.npz", **cases)
    env = {**os.environ, "ORTQUANT_ISA": isa}
    run = subprocess.run([sys.executable, "-c", _ROW_SCRIPT, str(Path(__file__).resolve().parents[1]),
                          str(tmp_path / "cases.npz"), str(tmp_path / "out.npz")],
                         capture_output=True, text=True, env=env, timeout=300, check=False)  # fmt: skip
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    for key, w in want.items():
        assert_bitexact(got[key], w)


def test_quant_int64_bitwidth_limits():
    x = np.zeros(3, F32)
    for bad in (0, -3, 63):
        model, feeds = make_node_model(
            "Quant",
            DOMAIN,
            [x, np.array(1.0, F64), np.array(0.0, F64), np.array(bad, np.int64)],
            const=[False, True, True, True],
            attrs={"signed": 1, "narrow": 0},
        )
        with pytest.raises(ORT_ERRORS, match=r"Quant node 'quant_node'.*bitwidth"):
            run_model(model, feeds)


def test_float16_and_float64_do_not_mix():
    x = np.zeros(3, np.float16)
    model, feeds = make_node_model(
        "Quant", DOMAIN, [x, np.array(1.0, F64), np.array(0.0, F64), np.array(8.0, F32)], attrs={"signed": 1}
    )
    with pytest.raises(ORT_ERRORS):
        run_model(model, feeds)


@needs_qonnx
@pytest.mark.parametrize("dtypes", [(F32, F64), (F64, F32), (F64, F64)])
def test_bipolar_quant_wide(dtypes):
    rng = np.random.default_rng(3)
    x = _x(rng, (3, 4, 5), dtypes[0])
    with np.errstate(over="ignore"):
        scale = np.array([0.1, 1.0 / 3.0, -0.7, 1e300, np.nan], dtypes[1]).reshape(1, 1, 5)
    model, feeds = make_node_model("BipolarQuant", DOMAIN, [x, scale])
    got = run_model(model, feeds)[0]
    want = qonnx_execute(qonnx_node("BipolarQuant", 2), [x, scale])
    assert want.dtype == F64  # qonnx returns numpy's dtype; ortquant rounds it to float32 (docs/ops.md)
    with np.errstate(over="ignore"):  # 1e300 rounds to inf in float32, as intended
        assert_bitexact(got, want.astype(F32))


@needs_qonnx
@pytest.mark.parametrize("tdtype", [F64, np.int64])
def test_multithreshold_wide_thresholds(tdtype):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 4, 4)) * 4).astype(F32)
    x.reshape(-1)[:8] = [0.1, np.float32(0.1), np.nextafter(F32(0.1), F32(1)), -0.0, np.inf, -np.inf, np.nan, 3.0]
    if tdtype == F64:
        thr = np.sort(rng.standard_normal((3, 7)) * 4, axis=1)
        thr[0, :3] = [0.1, float(np.float32(0.1)), 1e39]  # between float32 values, exactly one, beyond FLT_MAX
        thr[1, 0] = -1e39
    else:
        thr = np.sort(rng.integers(-6, 7, (3, 7)), axis=1).astype(np.int64)
    attrs = {"out_dtype": "UINT4", "out_scale": 0.5, "out_bias": -1.0, "data_layout": "NCHW"}
    for const in (False, True):
        model, feeds = make_node_model("MultiThreshold", DOMAIN, [x, thr], const=[False, const], attrs=attrs)
        got = run_model(model, feeds)[0]
        want = qonnx_execute(qonnx_node("MultiThreshold", 2, **attrs), [x, thr])
        assert_bitexact(got, want.astype(F32))


def _qkeras_like_model() -> tuple:
    """A QKeras-converter-like dense layer: Quant on input and weights with float64 scale/zeropt/bitwidth
    initializers, MatMul, Add, Quant (float64 params), BipolarQuant (float64 scale) on a graph output."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((16, 8)).astype(F32)
    inits = [
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(rng.standard_normal(8).astype(F32), "b"),
        numpy_helper.from_array(np.array(0.0625, F64), "s_in"),
        numpy_helper.from_array(np.array(0.0, F64), "z"),
        numpy_helper.from_array(np.array(6.0, F64), "bw6"),
        numpy_helper.from_array((np.abs(w).max(axis=0, keepdims=True) / 7).astype(F64), "s_w"),
        numpy_helper.from_array(np.array(4, np.int64), "bw4"),
        numpy_helper.from_array(np.array(0.3, F64), "s_out"),
        numpy_helper.from_array(np.array(1.0 / 3.0, F64), "s_bip"),
    ]
    q = lambda i, s, b, o, name, signed=1: helper.make_node(  # noqa: E731
        "Quant", [i, s, "z", b], [o], name=name, domain=DOMAIN, signed=signed, narrow=0, rounding_mode="ROUND"
    )
    nodes = [
        q("x", "s_in", "bw6", "xq", "q_in"),
        q("w", "s_w", "bw4", "wq", "q_w"),
        helper.make_node("MatMul", ["xq", "wq"], ["mm"], name="mm"),
        helper.make_node("Add", ["mm", "b"], ["pre"], name="add"),
        q("pre", "s_out", "bw6", "y", "q_out", signed=0),
        helper.make_node("BipolarQuant", ["pre", "s_bip"], ["ybin"], name="bip", domain=DOMAIN),
    ]
    graph = helper.make_graph(
        nodes,
        "qkeras_like",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8]),
            helper.make_tensor_value_info("ybin", TensorProto.FLOAT, [4, 8]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid(DOMAIN, 1)])
    model.ir_version = IR_VERSION
    return model, (rng.standard_normal((4, 16)) * 2).astype(F32)


@needs_qonnx
def test_qkeras_like_model_end_to_end_matches_execute_onnx():
    from qonnx.core.modelwrapper import ModelWrapper
    from qonnx.core.onnx_exec import execute_onnx
    from qonnx.transformation.infer_shapes import InferShapes

    model, x = _qkeras_like_model()
    got = ortquant.InferenceSession(model).run(None, {"x": x})
    make_model = helper.make_model
    helper.make_model = lambda g, **kw: make_model(g, **{"ir_version": IR_VERSION, **kw})
    try:
        want = execute_onnx(ModelWrapper(model).transform(InferShapes()), {"x": x})
    finally:
        helper.make_model = make_model
    assert_bitexact(got[0], want["y"])
    assert want["ybin"].dtype == F64  # declared float, numpy gives float64
    assert_bitexact(got[1], want["ybin"].astype(F32))
    # native: a C/C++ host (plain onnxruntime + the library) runs the file as published, no rewrite
    import onnxruntime as ort

    assert ortquant.prepare_model(model, exact=True) is model  # no loading rewrite (the default only folds weights)
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    plain = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    for g, w in zip(plain.run(None, {"x": x}), got, strict=True):
        assert_bitexact(g, w)


TRUNC_COMBOS = [
    # X, scale, zeropt, in_bitwidth (v1), out_scale (v2), out_bitwidth
    (F32, F64, F64, F64, F64, F64),
    (F32, F32, F32, np.int64, F32, np.int64),
    (F32, F32, F64, F32, F32, F32),
    (F64, F32, F32, F32, F64, F32),
    (F32, F32, F32, F64, F64, F64),
    (F32, F64, F32, np.int64, F32, np.int32),
    (F64, F64, F64, np.int64, F64, np.int64),
]


@needs_qonnx
@pytest.mark.parametrize("mode", ["FLOOR", "ROUND", "CEIL", "UP", "DOWN", "HALF_UP", "HALF_DOWN"])
@pytest.mark.parametrize("combo", TRUNC_COMBOS)
@pytest.mark.parametrize("version", [1, 2])
def test_trunc_wide_params_match_qonnx(mode, combo, version):
    xd, sd, zd, ibd, osd, obd = combo
    rng = np.random.default_rng(zlib.crc32(repr((mode, combo, version)).encode()))
    x = (rng.standard_normal((2, 3, 5)) * 50).astype(xd)
    x.reshape(-1)[:6] = np.array([0.0, -0.0, 1e30, -1e30, np.inf, np.nan]).astype(xd)
    scale = np.array([0.1, 0.25, 1.0 / 3.0], sd).reshape(1, 3, 1)
    zeropt = np.array([0.0, 2.0, -1.0], zd).reshape(1, 3, 1)
    attrs = {"rounding_mode": mode}
    if version == 1:
        ins = [x, scale, zeropt, np.array(8, ibd), np.array(5, obd)]
    else:
        attrs.update(signed=1, narrow=0)
        out_scale = (scale.astype(F64) * np.array([4.0, 8.0, 3.0]).reshape(1, 3, 1)).astype(osd)
        ins = [x, scale, zeropt, np.array(8, ibd), out_scale, np.array(4, obd)]
    for const in (False, True):
        model, feeds = make_node_model(
            "Trunc", DOMAIN, ins, const=[False] + [const] * (len(ins) - 1), attrs=attrs, opset=version
        )
        got = run_model(model, feeds)[0]
        with np.errstate(all="ignore"):  # qonnx's own functions (execute_node calls exactly these)
            if version == 1:
                want = qonnx_trunc_v1(*ins, mode)
            else:
                x_, s_, z_, ib_, os_, ob_ = ins
                want = qonnx_trunc_v2(x_, s_, z_, ib_, 0, 1, os_, ob_, mode)
            assert_bitexact(got, np.asarray(want).astype(F32))
