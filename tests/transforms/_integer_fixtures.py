"""What the integer-mode transform tests share: the backend fixture (each test runs on the engine, on the
float-exact backend and on the per-layer choice), a float32 initializer maker and one-op model builders."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


@pytest.fixture(params=["engine", "float", "mixed"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("ORTQUANT_INTEGER_BACKEND", request.param)
    return str(request.param)


def registered_session(m: onnx.ModelProto) -> object:
    """An onnxruntime session of ``m`` with the library registered by ``ortquant.register``, as a user's would be."""
    import onnxruntime as ort

    import ortquant

    so = ort.SessionOptions()
    so.log_severity_level = 3
    ortquant.register(so)
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def prepared_without(m: onnx.ModelProto, step: str) -> onnx.ModelProto:
    """``m`` prepared by every step of the integer-mode pipeline but ``step`` (the reference of a step that must keep
    every output's bits)."""
    from ortquant import transforms

    opts = transforms.PrepareOptions(integer=True)
    for t in transforms.PIPELINE:
        if t.name != step and t.when(opts):
            m = t.fn(m)
    return m


def init(name: str, v: object, dtype: type = np.float32) -> onnx.TensorProto:
    """An initializer ``name`` holding ``v`` as ``dtype``."""
    return numpy_helper.from_array(np.asarray(v, dtype=dtype), name)


def qgemm_model(w: np.ndarray, x_shape: list[int] | None = None, **attrs: int) -> onnx.ModelProto:
    """x -> one ``ortquant.integer::QGemm`` node 'fc' -> y: weight codes ``w`` [N, K], every output channel's scale
    0.01 and bias 0, a 4-bit unsigned activation quantizer of scale 0.05, plus ``attrs`` (``x_rank``,
    ``flatten``)."""
    n = w.shape[0]
    g = helper.make_graph(
        [helper.make_node("QGemm", ["x", "w", "s", "b"], ["y"], name="fc", domain="ortquant.integer", act_scale=0.05,
                          act_bits=4, act_signed=0, **attrs)],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[init("w", w, np.int8), init("s", np.full(n, 0.01), np.float64),
                     init("b", np.zeros(n), np.float64)],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ortquant.integer", 1)])
    m.ir_version = 10
    return m


def qconv_params(rng: np.random.Generator, m: int, c: int, k: list[int]) -> dict[str, np.ndarray]:
    """The initializers :func:`qconv_reference` reads: weights ``w`` [m, c, *k] with per-channel scales ``ws`` (4-bit
    signed narrow, zero point ``wz``, bits ``wb``), the activation quantizer ``as``/``az``/``ab`` (0.05, 4-bit
    unsigned) and the bias ``cb``."""
    return {
        "w": (rng.standard_normal((m, c, *k)) * 0.3).astype(np.float32),
        "ws": (0.01 + rng.random((m,) + (1,) * (1 + len(k))) * 0.05).astype(np.float32),
        "wz": np.float32(0),
        "wb": np.float32(4),
        "as": np.float32(0.05),
        "az": np.float32(0),
        "ab": np.float32(4),
        "cb": (rng.standard_normal(m) * 0.1).astype(np.float32),
    }


def qconv_reference(x: np.ndarray, p: dict[str, np.ndarray], k: list[int], *, relu: bool = True) -> np.ndarray:
    """The integer-mode output of ``Quant(x; as, az=0, 4 bits unsigned) -> Conv(Quant(w; ws, 4 bits signed narrow),
    cb, pads 1) [-> Relu]`` from the integer reference: act codes, an int64 convolution, one float64 rescale. 1-D
    when len(k) == 1 ([N, C, L] in and out)."""
    from ortquant.reference import integer as iref
    from ortquant.reference import qonnx as qref

    wy = qref.quant(p["w"], p["ws"], p["wz"], p["wb"], signed=True, narrow=True, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / p["ws"].astype(np.float64)).astype(np.int64)
    a = iref.act_codes(x, float(p["as"]), 0.0, 4, False)
    if len(k) == 1:  # as a 2-D layer of height 1
        a, codes = a[:, :, None, :], codes[:, :, None, :]
    pad_h = 1 if len(k) == 2 else 0
    ap = np.pad(a, ((0, 0), (0, 0), (pad_h, pad_h), (1, 1)))
    kh, kw = codes.shape[2:]
    oh, ow = ap.shape[2] - kh + 1, ap.shape[3] - kw + 1
    acc = np.zeros((a.shape[0], codes.shape[0], oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            acc += np.einsum("nchw,mc->nmhw", ap[:, :, i : i + oh, j : j + ow], codes[:, :, i, j])
    s = np.float64(p["as"]) * p["ws"].reshape(-1).astype(np.float64)
    y = iref.rescale(acc, s, p["cb"].astype(np.float64), 1, relu=relu)
    return y[:, :, 0, :] if len(k) == 1 else y


def lowered_in_fresh_process(
    path: object, x_shape: tuple[int, ...], y_shape: tuple[int, ...], step: str, x_std: float = 1.0
) -> None:
    """The model at ``path`` through the public API in a fresh process, as a user runs it: integer mode gives the
    default mode's values (within 1e-5 of their largest magnitude) on a normal random input of ``x_shape`` and
    standard deviation ``x_std`` (output
    ``y_shape``), and ``ortquant check --integer`` reports the rewrite ``step`` and every layer lowered."""
    import subprocess
    import sys

    from conftest import subprocess_env

    code = (
        "import sys, numpy as np, ortquant\n"
        f"x = np.random.default_rng(3).normal(0, {x_std!r}, {tuple(x_shape)!r}).astype(np.float32)\n"
        "d = ortquant.InferenceSession(sys.argv[1]).run(None, {'x': x})[0]\n"
        "i = ortquant.InferenceSession(sys.argv[1], integer=True).run(None, {'x': x})[0]\n"
        f"assert d.shape == i.shape == {tuple(y_shape)!r}, (d.shape, i.shape)\n"
        "err = float(np.max(np.abs(d - i)))\n"
        "assert err <= 1e-5 * float(np.max(np.abs(d))), err\n"
        "print('ok', err)\n"
    )
    env = subprocess_env()
    proc = subprocess.run([sys.executable, "-W", "ignore", "-c", code, str(path)], capture_output=True, text=True,
                          env=env, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.startswith("ok"), proc.stdout + proc.stderr
    proc = subprocess.run([sys.executable, "-m", "ortquant", "check", "--integer", str(path)], capture_output=True,
                          text=True, env=env, timeout=300, check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"rewrite {step}:" in proc.stdout, proc.stdout
    assert "integer mode: 1 of 1 layer(s) on the integer path" in proc.stdout, proc.stdout
