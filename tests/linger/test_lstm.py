"""LSTMInt / LSTMInt_Is8_Is64 / LSTMInt_Is8_Is64_If32_If32 (linger.md section 4, decisions 11-13, 15, 16).

The C++ (through ortquant._C on every ISA path and through onnxruntime) is compared bit for bit with the numpy
reference, which itself reproduces linger 1.1.1's conformance outputs.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import rnn_util as u

import ortquant
from conftest import ORT_ERRORS, assert_bitexact, make_node_model, needs_onnx_python_inference, run_model
from ortquant import kernels
from ortquant.reference import linger_rnn as ref

ISAS = kernels.supported_isas()  # also selects the GEMM kernel (scalar, AVX2, AVX-VNNI, VNNI-512)
NAMES = ["LSTMInt", "LSTMInt_Is8_Is64", "LSTMInt_Is8_Is64_If32_If32"]


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def test_table_spot_values() -> None:
    # Values stated in linger.md next to the segment definitions.
    assert [ref.sigmoid_segment(v) for v in (0, 2048, -2048, 32767, -32768)] == [64, 94, 34, 127, 0]
    sig, tanh = ref.sigmoid_table(), ref.tanh_table()
    assert sig.shape == tanh.shape == (65536,)
    assert tanh[32768] == 0 and tanh[0] == -128 and tanh[65535] == 127  # floor makes it asymmetric
    # Monotone non-decreasing, as piecewise-linear approximations of monotone functions must be.
    assert (np.diff(sig) >= 0).all() and (np.diff(tanh) >= 0).all()


@pytest.mark.parametrize("case", u.LSTM_CASES)
def test_reference_matches_linger(case: str) -> None:
    """The numpy reference alone reproduces linger's outputs, hidden and cell (validates the reading of the spec)."""
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
        kernels.lstm_int(
            c["x"], c["w_ih"], c["w_hh"], c["b_ih"], c["b_hh"], lengths=c["lengths"], h0=c["h0"], c0=c["c0"],
            batch_first=bool(a["batch_first"]), go_forward=go_forward, **scales,
        )
    )  # fmt: skip


# (T, B, D, H, batch_first, lengths, state, bias, o_bits): every form, both layouts, lengths 1..T, B = 1 and > 1,
# H below, at and above the vector widths (8, 16).
SHAPES = [
    (1, 1, 3, 5, False, None, False, True, 8),
    (6, 1, 4, 16, True, None, True, True, 8),
    (5, 3, 7, 19, False, [5, 1, 3], False, True, 8),
    (7, 4, 5, 33, True, [2, 7, 7, 1], True, True, None),
    (4, 2, 6, 8, False, [4, 4], True, False, 8),
    (9, 7, 3, 24, True, None, False, True, None),
    (3, 5, 2, 40, False, [3, 1, 2, 3, 1], False, False, 4),
]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("go_forward", [True, False])
def test_kernels_match_reference(isa, rng, shape, go_forward) -> None:
    t, b, d, h, bf, lens, state, bias, o_bits = shape
    c = u.random_case(
        rng, lstm=True, t_len=t, batch=b, d=d, h=h, batch_first=bf, lengths=lens, state=state, bias=bias,
        o_bits=o_bits, scale_o=256.0 if o_bits == 8 else 4.0,
    )  # fmt: skip
    for got, want in zip(_kernel(c, go_forward), u.case_reference(c, go_forward), strict=True):
        assert_bitexact(got, want)


@pytest.mark.parametrize("w_lo,w_hi", [(-127, 127), (-64, 64), (-8, 7), (-128, -128)])
def test_kernels_weight_ranges(isa, rng, w_lo, w_hi) -> None:
    """The recurrent and input projections take the exact product that fits their weights: no -128 (sign step),
    every |w| <= 64 (the biased bytes as they are, int16 sums for narrow weights), otherwise the widening kernel;
    the same bits as the reference on every path, signed inputs and states at the int8 extremes."""
    c = u.random_case(rng, lstm=True, t_len=7, batch=5, d=37, h=29, state=True, lengths=[7, 1, 4, 7, 2])
    for key in ("w_ih", "w_hh"):
        c[key] = rng.integers(w_lo, w_hi + 1, c[key].shape).astype(np.int8)
    c["x"].reshape(-1)[:4] = [-128, 127, -128, 127]
    for fwd in (True, False):
        for got, want in zip(_kernel(c, fwd), u.case_reference(c, fwd), strict=True):
            assert_bitexact(got, want)


def test_kernels_saturation_and_general_scales(isa, rng) -> None:
    """Gate sums far beyond int16 (large biases), an unbounded cell from c0, and non-power-of-two scales."""
    c = u.random_case(rng, lstm=True, t_len=6, batch=3, d=9, h=21, state=True, bias_range=2**26)
    c["c0"] = (rng.standard_normal(c["c0"].shape) * 3e4).astype(np.float32)
    c["c0"][0, 0, :4] = [np.inf, -np.inf, 1e30, -1e30]
    c["h0"][0, 1, :3] = [np.inf, -np.inf, 1e30]
    for fwd in (True, False):
        for got, want in zip(_kernel(c, fwd), u.case_reference(c, fwd), strict=True):
            assert_bitexact(got, want)
    odd = {"scale_i": 100.0, "scale_h": 37.5, "scale_iw": 80.0, "scale_hw": 91.0}
    c = u.random_case(rng, lstm=True, t_len=5, batch=2, d=6, h=17, scales=odd, scale_o=70.0, lengths=[5, 3])
    for got, want in zip(_kernel(c, True), u.case_reference(c, True), strict=True):
        assert_bitexact(got, want)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("domain", ["thinker", "onnxinfer"])
def test_every_form_through_onnxruntime(rng, name, domain) -> None:
    """Each name runs each input form (with and without lengths, initial state, biases), int8 and float output."""
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
        c = u.random_case(rng, lstm=True, t_len=5, batch=2, d=3, h=9, batch_first=bool(k % 2),
                          o_bits=8 if k % 3 else None, **f)  # fmt: skip
        model, feeds = u.case_model(c, name, domain, const_weights=bool(k % 2))
        for got, want in zip(run_model(model, feeds), u.case_reference(c), strict=True):
            assert_bitexact(got, want)


@pytest.mark.parametrize("go_forward", [True, False])
def test_onnxruntime_threads_and_batch(rng, go_forward) -> None:
    c = u.random_case(rng, lstm=True, t_len=12, batch=13, d=10, h=37, lengths=list(rng.integers(1, 13, 13)))
    model, feeds = u.case_model(c, "LSTMInt", go_forward=go_forward)
    want = u.case_reference(c, go_forward)
    for threads in (1, 2):
        for got, w in zip(run_model(model, feeds, threads=threads), want, strict=True):
            assert_bitexact(got, w)


@pytest.mark.parametrize("case", u.LSTM_CASES)
def test_conformance_node_through_onnxruntime(case: str) -> None:
    """The LSTMInt nodes of each conformance case, fed the int8 input linger quantized, match linger exactly."""
    for model, feeds, want in u.rnn_nodes_of_case(case):
        for got, w in zip(run_model(model, feeds), want, strict=True):
            assert_bitexact(got, w)


@pytest.mark.parametrize("case", u.LSTM_CASES)
def test_conformance_through_inference_session(case: str) -> None:
    """The whole exported linger graph (Quant, the recurrent node(s), iqCat/Concat for bidirectional models,
    Dequant, float Dequant(1.0) after float outputs) through ortquant.InferenceSession: linger's outputs, hidden
    and cell exactly (max abs diff 0)."""
    model, feeds, expected = u.load_case(case)
    got = ortquant.InferenceSession(model).run(None, feeds)
    for g, e in zip(got, expected, strict=True):
        assert_bitexact(g, e)


def test_one_session_many_threads(rng) -> None:
    """The kernel is immutable after creation: one session run from several Python threads at once (2 intra-op
    threads each) gives the reference result every time; so does an empty batch."""
    from concurrent.futures import ThreadPoolExecutor

    import onnxruntime as ort

    c = u.random_case(rng, lstm=True, t_len=9, batch=7, d=6, h=20, lengths=[9, 1, 4, 9, 2, 7, 5], state=True)
    model, feeds = u.case_model(c, "LSTMInt_Is8_Is64_If32_If32")
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    sess = ortquant.InferenceSession(model, sess_options=so)
    want = u.case_reference(c)
    with ThreadPoolExecutor(4) as pool:
        for got in pool.map(lambda _: sess.run(None, feeds), range(24)):
            for g, w in zip(got, want, strict=True):
                assert_bitexact(g, w)
    c = u.random_case(rng, lstm=True, t_len=3, batch=0, d=2, h=4)
    got = run_model(*u.case_model(c, "LSTMInt"))
    assert [g.shape for g in got] == [(3, 0, 4), (1, 0, 4), (1, 0, 4)]


@pytest.mark.parametrize("lengths", [None, [5, 2, 4]])
def test_bidirectional_float_output_with_concat(rng, lengths) -> None:
    """linger's bidirectional export without o_bits: two LSTMInt nodes (go_forward 1 / 0) on the same input,
    outputs joined by Concat(axis=2), hidden and cell by Concat(axis=0)."""
    h = 6
    fwd = u.random_case(rng, lstm=True, t_len=5, batch=3, d=4, h=h, lengths=lengths, o_bits=None)
    bwd = u.random_case(rng, lstm=True, t_len=5, batch=3, d=4, h=h, lengths=lengths, o_bits=None)
    bwd["x"], bwd["lengths"] = fwd["x"], fwd["lengths"]
    helper, numpy_helper = onnx.helper, onnx.numpy_helper
    inits, nodes = [], []
    for tag, c, go in (("f", fwd, 1), ("b", bwd, 0)):
        names = ["x"] + (["len"] if lengths else [])
        for key in ("w_ih", "w_hh", "b_ih", "b_hh"):
            inits.append(numpy_helper.from_array(c[key], f"{key}_{tag}"))
            names.append(f"{key}_{tag}")
        attrs = dict(c["attrs"], go_forward=go)
        nodes.append(helper.make_node("LSTMInt", names, [f"y_{tag}", f"h_{tag}", f"c_{tag}"], domain="thinker",
                                      name=f"lstm_{tag}", **attrs))  # fmt: skip
    nodes += [
        helper.make_node("Concat", ["y_f", "y_b"], ["y"], axis=2),
        helper.make_node("Concat", ["h_f", "h_b"], ["hn"], axis=0),
        helper.make_node("Concat", ["c_f", "c_b"], ["cn"], axis=0),
    ]
    graph_inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.INT8, [5, 3, 4])]
    feeds = {"x": fwd["x"]}
    if lengths:
        graph_inputs.append(helper.make_tensor_value_info("len", onnx.TensorProto.INT64, [3]))
        feeds["len"] = fwd["lengths"]
    outputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in ("y", "hn", "cn")]
    model = helper.make_model(
        helper.make_graph(nodes, "bidir", graph_inputs, outputs, initializer=inits),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("thinker", 1)],
    )
    model.ir_version = 10
    rf, rb = u.case_reference(fwd, True), u.case_reference(bwd, False)
    want = [np.concatenate([rf[0], rb[0]], axis=2), np.concatenate([rf[1], rb[1]]), np.concatenate([rf[2], rb[2]])]
    for got, w in zip(run_model(model, feeds), want, strict=True):
        assert_bitexact(got, w)


# ---- bad input -----------------------------------------------------------------------------------------------


def _error(model, feeds) -> str:
    with pytest.raises(ORT_ERRORS) as e:
        run_model(model, feeds)
    return str(e.value)


def _base(rng, **kw) -> dict:
    return u.random_case(rng, lstm=True, t_len=4, batch=2, d=3, h=5, **kw)


@pytest.mark.parametrize("const_weights", [True, False])
def test_wrong_weight_shapes(rng, const_weights) -> None:
    for key, bad, words in [
        ("w_ih", np.zeros((19, 3), np.int8), "W_ih"),
        ("w_ih", np.zeros((20, 4), np.int8), "W_ih"),
        ("w_hh", np.zeros((20, 4), np.int8), "W_hh"),
        ("b_ih", np.zeros(19, np.int32), "B_ih"),
        ("b_hh", np.zeros((1, 20), np.int32), "B_hh"),
    ]:
        c = _base(rng)
        c[key] = bad
        msg = _error(*u.case_model(c, "LSTMInt", const_weights=const_weights))
        assert "lstmint_node" in msg and words in msg and "shape" in msg, msg


def test_x_feature_size_mismatch(rng) -> None:
    c = _base(rng)
    c["x"] = np.zeros((4, 2, 6), np.int8)
    msg = _error(*u.case_model(c, "LSTMInt"))
    assert "lstmint_node" in msg and "features" in msg, msg


@pytest.mark.parametrize("lengths", [[5, 1], [0, 2], [-1, 4], [2]])
def test_bad_lengths(rng, lengths) -> None:
    c = _base(rng, lengths=[1, 1])
    c["lengths"] = np.asarray(lengths, np.int64)
    msg = _error(*u.case_model(c, "LSTMInt_Is8_Is64"))
    assert "lstmint_is8_is64_node" in msg and "lengths" in msg, msg


def test_wrong_dtypes(rng) -> None:
    c = _base(rng)
    c["x"] = c["x"].astype(np.float32)
    msg = _error(*u.case_model(c, "LSTMInt"))  # refused by onnxruntime at load (x is declared int8)
    assert "lstmint_node" in msg and "tensor(float)" in msg, msg
    c = _base(rng)
    c["b_ih"] = c["b_ih"].astype(np.int64)
    c["b_hh"] = c["b_hh"].astype(np.int64)
    msg = _error(*u.case_model(c, "LSTMInt", const_weights=False))
    assert "B_ih" in msg or "INT64" in msg.upper(), msg
    c = _base(rng, lengths=[4, 4])
    c["lengths"] = c["lengths"].astype(np.float32)  # a float at position 1 reads as h0 without c0
    msg = _error(*u.case_model(c, "LSTMInt"))
    assert "lstmint_node" in msg and "c0" in msg, msg
    c = _base(rng, lengths=[4, 4], state=True)
    c["h0"] = c["h0"].astype(np.float64)
    msg = _error(*u.case_model(c, "LSTMInt"))
    assert "lstmint_node" in msg, msg


def test_bad_state_shape_and_nan(rng) -> None:
    c = _base(rng, lengths=[4, 4], state=True)
    c["c0"] = np.zeros((1, 3, 5), np.float32)
    msg = _error(*u.case_model(c, "LSTMInt_Is8_Is64_If32_If32"))
    assert "c0" in msg and "shape" in msg, msg
    c = _base(rng, lengths=[4, 4], state=True)
    c["h0"][0, 1, 2] = np.nan
    msg = _error(*u.case_model(c, "LSTMInt_Is8_Is64_If32_If32"))
    assert "h0" in msg and "NaN" in msg, msg


@pytest.mark.parametrize(
    "attrs,words",
    [
        ({"num_layers": 2}, "num_layers"),
        ({"scale_i": 0.0}, "scale_i"),
        ({"scale_hw": -4.0}, "scale_hw"),
        ({"o_bits": 16}, "o_bits"),
        ({"data_bits": 12}, "data_bits"),
        ({"platform_quant": "mlu_quant"}, "platform_quant"),
        ({"batch_first": 2}, "batch_first"),
        ({"table_len": 0}, "table_len"),
        ({"sigmoid_bound": -1.0}, "sigmoid_bound"),
        ({"hidden_size": 0}, "hidden_size"),
    ],
)
def test_bad_attributes(rng, attrs, words) -> None:
    c = _base(rng)
    c["attrs"].update(attrs)
    msg = _error(*u.case_model(c, "LSTMInt"))
    assert "lstmint_node" in msg and words in msg, msg


def test_missing_attributes(rng) -> None:
    for key in ("hidden_size", "scale_h"):
        c = _base(rng)
        del c["attrs"][key]
        msg = _error(*u.case_model(c, "LSTMInt"))
        assert "lstmint_node" in msg and key in msg, msg
    c = _base(rng)
    del c["attrs"]["scale_o"]
    msg = _error(*u.case_model(c, "LSTMInt"))
    assert "scale_o" in msg, msg


def test_seed_table_attributes_are_accepted(rng) -> None:
    """Decision 13: table_len / sigmoid_bound / tanh_bound are validated and the luna tables apply regardless."""
    c = _base(rng, lengths=[4, 2])
    c["attrs"].update(table_len=256, sigmoid_bound=8.0, tanh_bound=4.0, scale_io=16.0, scale_ho=16.0)
    model, feeds = u.case_model(c, "LSTMInt")
    node = model.graph.node[0]
    attrs = [a for a in node.attribute if a.name != "go_forward"]
    del node.attribute[:]
    node.attribute.extend([*attrs, onnx.helper.make_attribute("go_gorward", 0)])  # the seed's spelling
    for got, want in zip(run_model(model, feeds), u.case_reference(c, False), strict=True):
        assert_bitexact(got, want)


def test_wrong_input_count(rng) -> None:
    c = _base(rng)
    ins = u.case_inputs(c)[:4]  # x, W_ih, W_hh, B_ih: one bias only
    model, feeds = make_node_model("LSTMInt", "thinker", ins, const=[False, True, True, True],
                                   attrs=c["attrs"], n_outputs=3, output_dtypes=[3, 1, 1])  # fmt: skip
    msg = _error(model, feeds)
    assert "lstmint_node" in msg and "inputs" in msg, msg


def test_gate_activations_every_path_every_input(isa) -> None:
    """The cell's sigmoid/tanh (SIMD formula or table gathers, per path) equal the tables on all int16 inputs,
    and saturate beyond them (decision 12)."""
    from ortquant import _C

    v = np.concatenate([np.arange(-32768, 32768), [-(2**31), -40000, 32768, 99999, 2**31 - 1]]).astype(np.int32)
    sig, tanh = _C.linger_rnn_activations(v)
    idx = np.clip(v, -32768, 32767).astype(np.int64) + 32768
    np.testing.assert_array_equal(sig, np.clip(ref.sigmoid_table()[idx], 0, 127))
    np.testing.assert_array_equal(tanh, ref.tanh_table()[idx])


@needs_onnx_python_inference
@pytest.mark.parametrize("lengths", [None, [3, 4]])
@pytest.mark.parametrize("o_bits", [8, None])
def test_schema_check_and_shape_inference(rng, lengths, o_bits) -> None:
    """onnx.checker (full check) accepts LSTMInt models and shape inference types the outputs like the kernel."""
    c = u.random_case(rng, lstm=True, t_len=4, batch=2, d=3, h=5, batch_first=True, lengths=lengths, o_bits=o_bits)
    model, _ = u.case_model(c, "LSTMInt")
    g = model.graph
    for o in g.output:  # make the node's outputs intermediate values, typed only by inference
        g.node.append(onnx.helper.make_node("Identity", [o.name], [o.name + "_y"]))
        o.name = o.name + "_y"
        o.type.tensor_type.shape.CopyFrom(onnx.helper.make_tensor_type_proto(1, [None] * 3).tensor_type.shape)
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    outs = {o.name: o.type.tensor_type for o in inferred.graph.value_info}
    assert outs["out0"].elem_type == (onnx.TensorProto.INT8 if o_bits else onnx.TensorProto.FLOAT)
    dims = [d.dim_value if d.HasField("dim_value") else None for d in outs["out0"].shape.dim]
    assert dims == [2, None if lengths else 4, 5]
    assert [d.dim_value for d in outs["out2"].shape.dim] == [1, 2, 5]
