"""GRUInt / GRUInt_Is8_Is64 / GRUInt_Is8_Is64_If32 (linger.md section 4, decisions 11-13, 16).

The C++ (through ortquant._C on every ISA path and through onnxruntime) is compared bit for bit with the numpy
reference, which itself reproduces linger 1.1.1's conformance outputs.
"""

from __future__ import annotations

import numpy as np
import pytest
import rnn_util as u

import ortquant
from conftest import ORT_ERRORS, assert_bitexact, run_model
from ortquant import kernels

ISAS = kernels.supported_isas()  # also selects the GEMM kernel (scalar, AVX2, AVX-VNNI, VNNI-512)
NAMES = ["GRUInt", "GRUInt_Is8_Is64", "GRUInt_Is8_Is64_If32"]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


@pytest.mark.parametrize("case", u.GRU_CASES)
def test_reference_matches_linger(case: str) -> None:
    """The numpy reference alone reproduces linger's outputs and hidden (validates the reading of the spec)."""
    model, feeds, expected = u.load_case(case)
    got = u.reference_graph(model, feeds)
    for g, e in zip(got, expected, strict=True):
        assert_bitexact(g, e)


def _kernel(c: dict, go_forward: bool) -> list[np.ndarray]:
    a = c["attrs"]
    scales = {k: a[k] for k in ("scale_i", "scale_h", "scale_iw", "scale_hw")}
    if "o_bits" in a:
        scales.update(scale_o=a["scale_o"], o_bits=a["o_bits"])
    return list(
        kernels.gru_int(
            c["x"], c["w_ih"], c["w_hh"], c["b_ih"], c["b_hh"], lengths=c["lengths"], h0=c["h0"],
            batch_first=bool(a["batch_first"]), go_forward=go_forward, **scales,
        )
    )  # fmt: skip


# (T, B, D, H, batch_first, lengths, state, bias, o_bits, scale_o)
SHAPES = [
    (1, 1, 3, 5, False, None, False, True, 8, 128.0),
    (6, 1, 4, 16, True, None, True, True, 8, 256.0),
    (5, 3, 7, 19, False, [5, 1, 3], False, True, 8, 64.0),
    (7, 4, 5, 33, True, [2, 7, 7, 1], True, True, None, 0.0),
    (4, 2, 6, 8, False, [4, 4], True, False, 8, 512.0),
    (9, 7, 3, 24, True, None, False, True, None, 0.0),
    (3, 5, 2, 40, False, [3, 1, 2, 3, 1], False, False, 5, 8.0),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("go_forward", [True, False])
def test_kernels_match_reference(isa, rng, shape, go_forward) -> None:
    t, b, d, h, bf, lens, state, bias, o_bits, scale_o = shape
    c = u.random_case(
        rng, lstm=False, t_len=t, batch=b, d=d, h=h, batch_first=bf, lengths=lens, state=state, bias=bias,
        o_bits=o_bits, scale_o=scale_o,
    )  # fmt: skip
    for got, want in zip(_kernel(c, go_forward), u.case_reference(c, go_forward), strict=True):
        assert_bitexact(got, want)


@pytest.mark.parametrize("w_lo,w_hi", [(-127, 127), (-64, 64), (-8, 7), (-128, -128)])
def test_kernels_weight_ranges(isa, rng, w_lo, w_hi) -> None:
    """The recurrent and input projections take the exact product that fits their weights: no -128 (sign step),
    every |w| <= 64 (the biased bytes as they are, int16 sums for narrow weights), otherwise the widening kernel;
    the same bits as the reference on every path, signed inputs and states at the int8 extremes."""
    c = u.random_case(rng, lstm=False, t_len=7, batch=5, d=37, h=29, state=True, lengths=[7, 1, 4, 7, 2])
    for key in ("w_ih", "w_hh"):
        c[key] = rng.integers(w_lo, w_hi + 1, c[key].shape).astype(np.int8)
    c["x"].reshape(-1)[:4] = [-128, 127, -128, 127]
    for fwd in (True, False):
        for got, want in zip(_kernel(c, fwd), u.case_reference(c, fwd), strict=True):
            assert_bitexact(got, want)


def test_kernels_saturation_and_general_scales(isa, rng) -> None:
    """Pre-activations far beyond int16 (decision 12: saturate), large r * h_n products, a huge h0, and
    non-power-of-two scales."""
    c = u.random_case(rng, lstm=False, t_len=6, batch=3, d=9, h=21, state=True, bias_range=2**28, o_bits=None)
    c["h0"] = (rng.standard_normal(c["h0"].shape) * 3e4).astype(np.float32)
    c["h0"][0, 0, :4] = [np.inf, -np.inf, 1e30, -1e30]
    for fwd in (True, False):
        for got, want in zip(_kernel(c, fwd), u.case_reference(c, fwd), strict=True):
            assert_bitexact(got, want)
    odd = {"scale_i": 100.0, "scale_h": 37.5, "scale_iw": 80.0, "scale_hw": 91.0}
    c = u.random_case(rng, lstm=False, t_len=5, batch=2, d=6, h=17, scales=odd, scale_o=70.0, lengths=[5, 3])
    for got, want in zip(_kernel(c, True), u.case_reference(c, True), strict=True):
        assert_bitexact(got, want)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("domain", ["thinker", "onnxinfer"])
def test_every_form_through_onnxruntime(rng, name, domain) -> None:
    forms = [
        {"lengths": None, "state": False, "bias": True},
        {"lengths": None, "state": False, "bias": False},
        {"lengths": [3, 5], "state": False, "bias": True},
        {"lengths": [5, 2], "state": False, "bias": False},
        {"lengths": [1, 4], "state": True, "bias": True},
        {"lengths": [5, 5], "state": True, "bias": False},
        {"lengths": None, "state": True, "bias": True},
    ]
    for k, f in enumerate(forms):
        c = u.random_case(rng, lstm=False, t_len=5, batch=2, d=3, h=9, batch_first=bool(k % 2),
                          o_bits=8 if k % 3 else None, **f)  # fmt: skip
        model, feeds = u.case_model(c, name, domain, const_weights=bool(k % 2))
        for got, want in zip(run_model(model, feeds), u.case_reference(c), strict=True):
            assert_bitexact(got, want)


@pytest.mark.parametrize("go_forward", [True, False])
def test_onnxruntime_threads_and_batch(rng, go_forward) -> None:
    c = u.random_case(rng, lstm=False, t_len=12, batch=13, d=10, h=37, lengths=list(rng.integers(1, 13, 13)))
    model, feeds = u.case_model(c, "GRUInt_Is8_Is64", go_forward=go_forward)
    want = u.case_reference(c, go_forward)
    for threads in (1, 2):
        for got, w in zip(run_model(model, feeds, threads=threads), want, strict=True):
            assert_bitexact(got, w)


@pytest.mark.parametrize("case", u.GRU_CASES)
def test_conformance_node_through_onnxruntime(case: str) -> None:
    """The GRU nodes of each conformance case, fed the int8 input linger quantized, match linger exactly."""
    for model, feeds, want in u.rnn_nodes_of_case(case):
        for got, w in zip(run_model(model, feeds), want, strict=True):
            assert_bitexact(got, w)


@pytest.mark.parametrize("case", u.GRU_CASES)
def test_conformance_through_inference_session(case: str) -> None:
    """The whole exported linger graph (Quant, the recurrent node(s), iqCat/Concat for bidirectional models,
    Dequant, float Dequant(1.0) after float outputs) through ortquant.InferenceSession: linger's outputs and hidden
    exactly (max abs diff 0)."""
    model, feeds, expected = u.load_case(case)
    got = ortquant.InferenceSession(model).run(None, feeds)
    for g, e in zip(got, expected, strict=True):
        assert_bitexact(g, e)


# ---- bad input -----------------------------------------------------------------------------------------------


def _error(model, feeds) -> str:
    with pytest.raises(ORT_ERRORS) as e:
        run_model(model, feeds)
    return str(e.value)


def _base(rng, **kw) -> dict:
    return u.random_case(rng, lstm=False, t_len=4, batch=2, d=3, h=5, **kw)


@pytest.mark.parametrize("const_weights", [True, False])
def test_wrong_weight_shapes(rng, const_weights) -> None:
    for key, bad, words in [
        ("w_ih", np.zeros((20, 3), np.int8), "W_ih"),  # an LSTM's 4H rows
        ("w_hh", np.zeros((15, 3), np.int8), "W_hh"),
        ("b_hh", np.zeros(14, np.int32), "B_hh"),
    ]:
        c = _base(rng)
        c[key] = bad
        msg = _error(*u.case_model(c, "GRUInt", const_weights=const_weights))
        assert "gruint_node" in msg and words in msg and "shape" in msg, msg


@pytest.mark.parametrize("lengths", [[5, 1], [0, 2], [-3, 1], [1, 2, 3]])
def test_bad_lengths(rng, lengths) -> None:
    c = _base(rng, lengths=[1, 1])
    c["lengths"] = np.asarray(lengths, np.int64)
    msg = _error(*u.case_model(c, "GRUInt_Is8_Is64"))
    assert "gruint_is8_is64_node" in msg and "lengths" in msg, msg


def test_bad_state(rng) -> None:
    c = _base(rng, lengths=[4, 4], state=True)
    c["h0"] = np.zeros((2, 2, 5), np.float32)
    msg = _error(*u.case_model(c, "GRUInt_Is8_Is64_If32"))
    assert "gruint_is8_is64_if32_node" in msg and "h0" in msg and "shape" in msg, msg
    c = _base(rng, lengths=[4, 4], state=True)
    c["h0"][0, 0, 0] = np.nan
    msg = _error(*u.case_model(c, "GRUInt_Is8_Is64_If32"))
    assert "h0" in msg and "NaN" in msg, msg


def test_wrong_dtypes(rng) -> None:
    c = _base(rng)
    c["w_hh"] = c["w_hh"].astype(np.int32)  # reads as [x, W_ih, B?]: no form
    msg = _error(*u.case_model(c, "GRUInt", const_weights=False))
    assert "gruint_node" in msg and "W_hh" in msg, msg
    c = _base(rng, lengths=[2, 2])
    c["lengths"] = c["lengths"].astype(np.int16)
    msg = _error(*u.case_model(c, "GRUInt_Is8_Is64"))
    assert "gruint_is8_is64_node" in msg, msg


@pytest.mark.parametrize(
    "attrs,words",
    [({"num_layers": 3}, "num_layers"), ({"scale_o": float("inf")}, "scale_o"), ({"batch_first": -1}, "batch_first"),
     ({"tanh_bound": float("nan")}, "tanh_bound"), ({"parameter_bits": 9}, "parameter_bits")],
)  # fmt: skip
def test_bad_attributes(rng, attrs, words) -> None:
    c = _base(rng)
    c["attrs"].update(attrs)
    msg = _error(*u.case_model(c, "GRUInt"))
    assert "gruint_node" in msg and words in msg, msg
