"""Integer mode's grid path for weights (``transforms/integer_grid_weight.py``): a weight computed from constants
only (a quantizer then a Transpose, an integer-valued constant, a DequantizeLinear on a constant, a quantized bias)
runs on the integer path with the codes of its grid. Expected outputs are computed here in numpy (int64 sums, one
float64 rescale) from the model's parameters, independently of the transform."""

from __future__ import annotations

import _integer_fixtures
import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from onnx import TensorProto, helper

import ortquant
from ortquant.reference import integer as iref
from ortquant.reference import qonnx as qref
from ortquant.transforms.lower_integer import integer_plan, lower_integer

Q = "qonnx.custom_op.general"
backend = _integer_fixtures.backend  # the fixture, by this name
S_A = np.float32(0.05)


def _model(nodes: list[onnx.NodeProto], inits: list[onnx.TensorProto], k: int) -> onnx.ModelProto:
    """x [N, K] -> Quant (4-bit signed, scale S_A) -> ``nodes`` (reading "xq", writing "y")."""
    inits = [*inits, _init("as", S_A), _init("az", 0.0), _init("ab", 4.0)]
    quant = helper.make_node("Quant", ["x", "as", "az", "ab"], ["xq"], name="aquant", domain=Q, signed=1)
    g = helper.make_graph(
        [quant, *nodes], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _run(m: onnx.ModelProto, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The integer-mode output and the activation codes of its input (numpy)."""
    x = np.random.default_rng(1).standard_normal((5, k)).astype(np.float32)
    got = ortquant.InferenceSession(m, integer=True).run(None, {"x": x})[0]
    return got, iref.act_codes(x, float(S_A), 0.0, 4, True)


def _same_bits(got: np.ndarray, want: np.ndarray) -> None:
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_quantizer_then_transpose(backend):
    """Quant(W [N, K], per-row scale) -> Transpose -> MatMul (Brevitas' x @ W.T): codes from the transposed grid."""
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((6, 12)) * 0.3).astype(np.float32)
    ws = (0.02 + rng.random((6, 1)) * 0.03).astype(np.float32)
    inits = [_init("w", w), _init("ws", ws), _init("wz", 0.0), _init("wb", 5.0)]
    nodes = [
        helper.make_node("Quant", ["w", "ws", "wz", "wb"], ["wq"], name="wquant", domain=Q, signed=1, narrow=1),
        helper.make_node("Transpose", ["wq"], ["wt"], name="wt", perm=[1, 0]),
        helper.make_node("MatMul", ["xq", "wt"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, 12)
    (d,) = integer_plan(m)
    assert d.integer and "weight computed by Quant -> Transpose on the grid" in d.reason, d
    assert [n.op_type for n in lower_integer(m).graph.node if n.op_type in ("Quant", "Transpose")] == []
    got, a = _run(m, 12)
    wy = qref.quant(w, ws, np.float32(0), np.float32(5), signed=True, narrow=True, rounding_mode="ROUND")
    codes = np.rint(wy.astype(np.float64) / ws.astype(np.float64)).astype(np.int64)  # [N, K]
    _same_bits(got, iref.rescale(a @ codes.T, np.float64(S_A) * ws.reshape(-1).astype(np.float64), np.zeros(6), 1))


def test_integer_valued_constant_weight_with_a_scale(backend):
    """FINN's streamlined form: an integer-valued float weight, then a Mul by a scale after the layer."""
    w = np.random.default_rng(3).integers(-3, 4, (8, 4)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["xq", "w"], ["y"], name="mm")]
    m = _model(nodes, [_init("w", w)], 8)
    (d,) = integer_plan(m)
    assert d.integer and "constant weight on the grid 1 * (q - 0), q in [-3, 3]" in d.reason, d
    got, a = _run(m, 8)
    _same_bits(got, iref.rescale(a @ w.astype(np.int64), np.full(4, np.float64(S_A)), np.zeros(4), 1))


def test_dequantize_linear_weight_per_output_channel(backend):
    """DequantizeLinear(int8 constant, per-column scale along axis 1) -> MatMul."""
    rng = np.random.default_rng(4)
    wi = rng.integers(-100, 101, (8, 3)).astype(np.int8)
    scale = (0.001 + rng.random(3) * 0.01).astype(np.float32)
    inits = [_init("wi", wi, np.int8), _init("wsc", scale), _init("wzp", np.zeros(3), np.int8)]
    nodes = [
        helper.make_node("DequantizeLinear", ["wi", "wsc", "wzp"], ["wd"], name="dq", axis=1),
        helper.make_node("MatMul", ["xq", "wd"], ["y"], name="mm"),
    ]
    m = _model(nodes, inits, 8)
    (d,) = integer_plan(m)
    assert d.integer and "weight computed by DequantizeLinear" in d.reason, d
    got, a = _run(m, 8)
    _same_bits(got, iref.rescale(a @ wi.astype(np.int64), np.float64(S_A) * scale.astype(np.float64), np.zeros(3), 1))


def test_quantized_bias_is_evaluated():
    """A Gemm whose bias is a Quant on a constant (Brevitas' bias quantizer): the bias's value is computed once."""
    rng = np.random.default_rng(5)
    w = rng.integers(-7, 8, (3, 8)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    inits = [_init("w", w), _init("bias", bias), _init("bs", 0.01), _init("bz", 0.0), _init("bb", 16.0)]
    nodes = [
        helper.make_node("Quant", ["bias", "bs", "bz", "bb"], ["bq"], name="bquant", domain=Q, signed=1),
        helper.make_node("Gemm", ["xq", "w", "bq"], ["y"], name="fc", transB=1),
    ]
    m = _model(nodes, inits, 8)
    (d,) = integer_plan(m)
    assert d.integer, d
    got, a = _run(m, 8)
    bq = qref.quant(bias, np.float32(0.01), np.float32(0), np.float32(16), signed=True, narrow=False,
                    rounding_mode="ROUND")  # fmt: skip
    _same_bits(got, iref.rescale(a @ w.astype(np.int64).T, np.full(3, np.float64(S_A)), bq.astype(np.float64), 1))


@pytest.mark.parametrize(
    "case,reason",
    [
        ("float", "not the output of a Quant / BipolarQuant on a constant, and its values are on no integer grid"),
        ("rows", "varies along another axis than the output channel"),
        ("malformed", "the weight's constant subgraph has a node onnxruntime refuses"),
    ],
)
def test_reasons_when_the_weight_has_no_usable_grid(case, reason):
    rng = np.random.default_rng(6)
    if case == "float":
        inits = [_init("wd", rng.standard_normal((8, 3)))]
        nodes = []
    elif case == "rows":  # a scale per row of [K, N]: along the reduction, not per output column
        wi = rng.integers(-100, 101, (8, 3)).astype(np.int8)
        inits = [_init("wi", wi, np.int8), _init("wsc", 0.001 + rng.random(8) * 0.01)]
        nodes = [helper.make_node("DequantizeLinear", ["wi", "wsc"], ["wd"], name="dq", axis=0)]
    elif case == "malformed":  # a Transpose with two inputs: onnxruntime refuses it, so it must stay in the graph
        inits = [_init("w", rng.integers(-3, 4, (3, 8)))]
        nodes = [helper.make_node("Transpose", ["w", "w"], ["wd"], name="wt")]
    m = _model([*nodes, helper.make_node("MatMul", ["xq", "wd"], ["y"], name="mm")], inits, 8)
    d = next(d for d in integer_plan(m) if d.node == "mm")
    assert not d.integer and reason in d.reason, d
    assert lower_integer(m) is m


def test_a_weight_that_is_an_activation_is_a_product_of_two_activations():
    """The second operand is the activation's own quantizer output, reshaped: not a weight, but on that quantizer's
    grid, so the MatMul is a product of two activations (the float-exact backend)."""
    nodes = [helper.make_node("Reshape", ["xq", "shape"], ["wd"], name="r")]
    m = _model(
        [*nodes, helper.make_node("MatMul", ["xq", "wd"], ["y"], name="mm")], [_init("shape", [8, 1], np.int64)], 8
    )
    d = next(d for d in integer_plan(m) if d.node == "mm")
    assert d.integer and "not computed from constant initializers only" not in d.reason, d
    assert "a product of two activations" in d.reason, d


@pytest.mark.parametrize(
    ("op", "attrs", "shape", "want"),
    [
        ("Transpose", {"perm": [1, 0]}, (2, 3), (3, 2)),
        ("Transpose", {"perm": [1, -(1 << 63)]}, (2, 3), None),  # not a permutation (numpy would wrap it): not here
        ("Transpose", {"perm": [1, 1]}, (2, 3), None),
        ("Flatten", {"axis": 2}, (2, 3), (6, 1)),  # axis = rank: one column (a modulo made it one row)
        ("Flatten", {"axis": -1}, (2, 3, 4), (6, 4)),
        ("Flatten", {"axis": 3}, (2, 3), None),
        ("Squeeze", {"axes": [1]}, (2, 1), (2,)),
        ("Squeeze", {"axes": [3]}, (2, 1), None),  # out of range (a modulo made it axis 1)
        ("Unsqueeze", {"axes": [-1]}, (2, 3), (2, 3, 1)),
        ("Unsqueeze", {"axes": [5]}, (2, 3), None),
    ],
)
def test_weight_data_movement_takes_only_what_onnx_allows(op, attrs, shape, want):
    """The weight subgraph's data movement in numpy: the ONNX op's own result, and None (left to the session that
    evaluates what is left, which refuses it, naming the node) for axes the op does not allow."""
    from ortquant.transforms.integer_grid_weight import _move

    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got = _move(helper.make_node(op, ["x"], ["y"], **attrs), [x])
    if want is None:
        assert got is None
    else:
        assert got is not None and got.shape == want
        np.testing.assert_array_equal(got.ravel(), (x.T if op == "Transpose" else x).ravel())


def _written_out(rng: np.random.Generator, shape: tuple[int, int], bits: int) -> tuple[np.ndarray, np.ndarray]:
    """A float32 weight [K, N] as a quantizer writes it out (qonnx's cleanup with the weight quantizers folded):
    float32(q * s) with a scale per output column, among them a column of multiples of 3, one whose smallest |q| is 3
    among codes prime to it (float32(3 * s) / 3 is then not s itself) and a column of zeros."""
    top = 2 ** (bits - 1) - 1
    q = rng.integers(-top, top + 1, shape)
    q[:, 1] = rng.choice([-9, -6, -3, 3, 6, 9], shape[0]) if top >= 9 else q[:, 1]
    q[:, 2] = 0
    if top >= 7:  # smallest |q| 3 with codes that are no multiples of it: the scale is not float32(3 * s) / 3
        q[:, 3] = rng.choice([-7, -4, -3, 3, 4, 7], shape[0])
        q[0, 3] = 3
    s = (0.003 + rng.random(shape[1]) * 0.05).astype(np.float32)
    if top >= 7:  # a scale s for column 3 with float32(float32(3 * s) / 3) != s
        s[3] = next(c for c in np.float32(0.0123) + np.arange(64, dtype=np.float32) * np.float32(1e-5)
                    if np.float32(np.float32(3 * c) / np.float32(3)) != c)  # fmt: skip
    return (q.astype(np.float32) * s).astype(np.float32), s


@pytest.mark.parametrize("bits", [2, 4, 8])
def test_a_weight_a_quantizer_wrote_out_is_read_on_its_grid(backend, bits):
    """A float weight with no quantizer left in the graph, exactly float32(q * s) per output column: its grid is
    inferred from its values (integer_grid_weight.inferred_weight_grid) and the layer lowered, with the values of
    the same weight behind its Quant."""
    rng = np.random.default_rng(40 + bits)
    w, _s = _written_out(rng, (16, 6), bits)
    m = _model([helper.make_node("MatMul", ["xq", "w"], ["y"], name="mm")], [_init("w", w)], 16)
    (d,) = integer_plan(m)
    assert d.integer and "constant weight on the grid" in d.reason, d
    got, a = _run(m, 16)
    # integer mode's contract: the exact sums of the codes q' and one float64 rescale by s_a * s', where float32(q' *
    # s') is every weight exactly (s' may be a multiple of s with the codes divided alike, and q' * s' is the weight
    # within half a float32 ulp): the float64 product of the activation codes and the weight, to a few ulps
    want = (a.astype(np.float64) @ w.astype(np.float64)) * np.float64(S_A)
    np.testing.assert_allclose(got, want.astype(np.float32), rtol=1e-6, atol=1e-12)


@pytest.mark.parametrize(
    "case",
    ["float", "rounded", "wide"],
)
def test_a_float_weight_on_no_grid_stays_float(case):
    rng = np.random.default_rng(9)
    if case == "float":  # a weight no quantizer wrote
        w = rng.standard_normal((16, 6)).astype(np.float32)
    elif case == "rounded":  # one value a float32 ulp off the grid
        w, _s = _written_out(rng, (16, 6), 4)
        w[3, 0] = np.nextafter(w[3, 0], np.float32(np.inf)) if w[3, 0] != 0 else np.float32(1e-3)
    else:  # codes wider than int8
        w = (rng.integers(-300, 301, (16, 6)) * np.float32(0.01)).astype(np.float32)
        w[0, :] = np.float32(0.01)
    m = _model([helper.make_node("MatMul", ["xq", "w"], ["y"], name="mm")], [_init("w", w)], 16)
    (d,) = integer_plan(m)
    assert not d.integer and "on no integer grid" in d.reason, d
