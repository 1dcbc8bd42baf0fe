"""Integer mode's chains (``transforms/integer_chain.py``, the QChain / QChainCodes ops): consecutive integer-mode
layers, each read only by the next, run as one node. The reference of every output is the same model prepared
without this step (one onnxruntime node per layer), bit for bit, on published models and on networks built here;
the models run through ``ortquant.InferenceSession``."""

from __future__ import annotations

import itertools
import os
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from _integer_fixtures import init as _init
from _integer_fixtures import prepared_without, registered_session
from onnx import TensorProto, helper

import ortquant
from ortquant.transforms.integer_chain import fuse_integer_chain, unchain

Q = "qonnx.custom_op.general"
STEP = "fuse_integer_chain"
ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(os.environ.get("ORTQUANT_REALWORLD", ROOT.parent / "shared" / "conformance" / "realworld"))


def _net(
    layers: list[str],
    *,
    batch: object = "n",
    hw: object = 4,
    extra_output: str | None = None,
    shortcut: bool = False,
    two_heads: bool = False,
) -> onnx.ModelProto:
    """Quant -> a stack of ``layers`` ("conv": 3x3 Conv + Relu + Quant, "pool": MaxPool 2x2, "gap":
    GlobalAveragePool, "dense": Flatten + MatMul + Relu + Quant, "head": MatMul, the model's output).
    ``extra_output`` also makes that value a graph output; ``shortcut`` adds the first layer's quantized output to
    the second's sums (before its Relu); ``two_heads`` ends in two MatMul heads reading the same flattened codes
    (outputs y and y2). Convolutions have 6 output channels. The input is [batch, 3, hw, hw]."""
    rng = np.random.default_rng(11)
    inits: list[onnx.TensorProto] = [_init("z", 0), _init("b4", 4), _init("as", 0.05)]
    nodes = [helper.make_node("Quant", ["x", "as", "z", "b4"], ["q0"], domain=Q, signed=0)]
    cur, c, flat, size = "q0", 3, None, 16  # size: pixels of a plane (hw = 4 when it is symbolic)
    for i, layer in enumerate(layers):
        if layer == "conv":
            m = 6
            inits += [_init(f"w{i}", rng.standard_normal((m, c, 3, 3)) * 0.3), _init(f"ws{i}", 0.02 + 0.01 * i),
                      _init(f"cb{i}", rng.standard_normal(m) * 0.1), _init(f"rs{i}", 0.1)]  # fmt: skip
            add = shortcut and i == 1  # the residual pattern: Conv -> Add(shortcut) -> Relu -> Quant
            nodes += [
                helper.make_node("Quant", [f"w{i}", f"ws{i}", "z", "b4"], [f"wq{i}"], domain=Q, signed=1, narrow=1),
                helper.make_node("Conv", [cur, f"wq{i}", f"cb{i}"], [f"c{i}"], pads=[1] * 4, kernel_shape=[3, 3]),
                *([helper.make_node("Add", [f"c{i}", "q1"], [f"s{i}"])] if add else []),
                helper.make_node("Relu", [f"s{i}" if add else f"c{i}"], [f"r{i}"]),
                helper.make_node("Quant", [f"r{i}", f"rs{i}", "z", "b4"], [f"q{i + 1}"], domain=Q, signed=0),
            ]
            cur, c = f"q{i + 1}", m
        elif layer == "pool":
            nodes.append(helper.make_node("MaxPool", [cur], [f"p{i}"], kernel_shape=[2, 2], strides=[2, 2]))
            cur, size = f"p{i}", size // 4
        elif layer == "gap":
            nodes.append(helper.make_node("GlobalAveragePool", [cur], [f"p{i}"]))
            cur, size = f"p{i}", 1
        elif layer in ("dense", "head"):
            if flat is None:
                nodes.append(helper.make_node("Flatten", [cur], [f"f{i}"]))
                cur, flat, c = f"f{i}", True, c * size
            inits.append(_init(f"d{i}", rng.standard_normal((c, 10)) * 0.3))
            inits.append(_init(f"ds{i}", 0.03))
            nodes += [
                helper.make_node("Quant", [f"d{i}", f"ds{i}", "z", "b4"], [f"dq{i}"], domain=Q, signed=1, narrow=1),
                helper.make_node("MatMul", [cur, f"dq{i}"], [f"g{i}"]),
            ]
            cur, c = f"g{i}", 10
            if layer == "dense":
                inits.append(_init(f"gs{i}", 0.1))
                nodes += [
                    helper.make_node("Relu", [f"g{i}"], [f"gr{i}"]),
                    helper.make_node("Quant", [f"gr{i}", f"gs{i}", "z", "b4"], [f"gq{i}"], domain=Q, signed=0),
                ]
                cur = f"gq{i}"
    if two_heads:
        nodes.append(helper.make_node("Flatten", [cur], ["flat"]))
        for h in ("y0", "y2"):
            inits += [_init(f"hw_{h}", rng.standard_normal((c * size, 10)) * 0.3), _init(f"hs_{h}", 0.03)]
            nodes += [
                helper.make_node("Quant", [f"hw_{h}", f"hs_{h}", "z", "b4"], [f"hq_{h}"], domain=Q, signed=1, narrow=1),
                helper.make_node("MatMul", ["flat", f"hq_{h}"], [h]),
            ]
    nodes[-3 if two_heads else -1].output[0] = "y"
    width = 10 if layers[-1] in ("dense", "head") or two_heads else None
    y_shape = [batch, width] if width else None
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)]
    if two_heads:
        outputs.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, y_shape))
    if extra_output:
        outputs.append(helper.make_tensor_value_info(extra_output, TensorProto.FLOAT, None))
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, hw, hw])], outputs,
        initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def _same_bits(m: onnx.ModelProto, feeds_list: list[dict[str, np.ndarray]]) -> onnx.ModelProto:
    """Runs ``m`` in integer mode and prepared without chains; every output the same bits. Returns the prepared
    model (with its chains)."""
    prepared = ortquant.prepare_model(m, integer=True)
    chained = ortquant.InferenceSession(m, integer=True)
    plain = registered_session(prepared_without(m, STEP))
    for feeds in feeds_list:
        for got, want in zip(chained.run(None, feeds), plain.run(None, feeds), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    return prepared


def _feeds(batch: int, seed: int = 3) -> dict[str, np.ndarray]:
    return {"x": (np.random.default_rng(seed).standard_normal((batch, 3, 4, 4)) * 0.8).astype(np.float32)}


@pytest.mark.parametrize(
    "layers,ops",
    [
        (["conv", "conv", "head"], ["QConvCodes", "QConvCodes", "QGemm"]),
        (["conv", "conv", "conv"], ["QConvCodes", "QConvCodes", "QConv"]),
        (["conv", "pool", "conv", "dense", "head"], ["QConvCodes", "QConvCodes", "QGemmCodes", "QGemm"]),
        (["conv", "dense", "dense"], ["QConvCodes", "QGemmCodes", "QGemm"]),  # (then the last Quant)
        (["conv", "conv", "gap"], ["QConvCodes", "QConvCodes", "AvgPoolCodes"]),
    ],
)
def test_a_chain_keeps_every_bit(layers: list[str], ops: list[str]) -> None:
    m = _net(layers)
    prepared = _same_bits(m, [_feeds(1), _feeds(3, seed=4)])
    fused = [n for n in prepared.graph.node if n.domain == "ortquant.integer"]
    assert len(fused) == 1 and fused[0].op_type in ("QChain", "QChainCodes"), [n.op_type for n in fused]
    steps = [n.op_type for n in unchain(prepared) if n.domain == "ortquant.integer"]
    assert steps == ops, steps


def _uint8_weights(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` with every weight quantizer 8-bit unsigned with a zero point per output channel (codes q - z wider than
    int8), the weights on that grid."""
    rng = np.random.default_rng(21)
    inits = {t.name: t for t in m.graph.initializer}
    m.graph.initializer.append(_init("b8", 8))
    for node in m.graph.node:
        if node.op_type != "Quant" or node.input[0] not in inits or not node.input[0].startswith(("w", "d")):
            continue
        w = onnx.numpy_helper.to_array(inits[node.input[0]])
        scale = float(onnx.numpy_helper.to_array(inits[node.input[1]]))
        out_axis = 0 if w.ndim == 4 else 1  # Conv [M, C, kh, kw], MatMul [K, N]
        shape = [1] * w.ndim
        shape[out_axis] = w.shape[out_axis]
        z = rng.integers(0, 256, shape).astype(np.float32)
        q = rng.integers(0, 256, w.shape).astype(np.float32)
        name = node.input[0]
        inits[name].CopyFrom(_init(name, ((q - z) * np.float32(scale)).astype(np.float32)))
        m.graph.initializer.append(_init(f"{name}_z", z))
        node.input[2], node.input[3] = f"{name}_z", "b8"
        for a in node.attribute:
            if a.name in ("signed", "narrow"):
                a.i = 0
    return m


def test_layers_with_shifted_weights_chain_and_keep_every_bit() -> None:
    # uint8 weights with per-channel zero points: each layer runs on the engine with w_shift, inside the chain
    m = _uint8_weights(_net(["conv", "pool", "conv", "dense", "head"]))
    prepared = _same_bits(m, [_feeds(1), _feeds(3, seed=4)])
    assert [n.op_type for n in prepared.graph.node if n.domain == "ortquant.integer"] == ["QChain"]
    steps = [n for n in unchain(prepared) if n.domain == "ortquant.integer"]
    assert [n.op_type for n in steps] == ["QConvCodes", "QConvCodes", "QGemmCodes", "QGemm"]
    assert all(any(a.name == "w_shift" for a in n.attribute) for n in steps)


def test_a_chain_that_ends_in_codes_keeps_every_bit() -> None:
    """Two convolutions whose codes two dense heads read (through one Flatten): QChainCodes, then the heads."""
    prepared = _same_bits(_net(["conv", "conv"], two_heads=True), [_feeds(1), _feeds(2, seed=5)])
    ops = [n.op_type for n in prepared.graph.node if n.domain == "ortquant.integer"]
    assert ops == ["QChainCodes", "QGemm", "QGemm"], ops
    assert [n.op_type for n in unchain(prepared)][:2] == ["QConvCodes", "QConvCodes"]


def _mlp(widths: list[int]) -> onnx.ModelProto:
    """Quant -> (MatMul -> Relu -> Quant) per width after the first, the last MatMul the output; x [n, widths[0]]."""
    rng = np.random.default_rng(6)
    inits = [_init("z", 0), _init("b4", 4), _init("as", 0.05), _init("rs", 0.1)]
    nodes = [helper.make_node("Quant", ["x", "as", "z", "b4"], ["q0"], domain=Q, signed=1)]
    for i, (k, n) in enumerate(itertools.pairwise(widths)):
        inits += [_init(f"d{i}", rng.standard_normal((k, n)) * 0.3), _init(f"ds{i}", 0.03)]
        nodes += [
            helper.make_node("Quant", [f"d{i}", f"ds{i}", "z", "b4"], [f"dq{i}"], domain=Q, signed=1, narrow=1),
            helper.make_node("MatMul", [f"q{i}", f"dq{i}"], [f"g{i}"]),
        ]
        if i < len(widths) - 2:
            nodes += [
                helper.make_node("Relu", [f"g{i}"], [f"r{i}"]),
                helper.make_node("Quant", [f"r{i}", "rs", "z", "b4"], [f"q{i + 1}"], domain=Q, signed=0),
            ]
    nodes[-1].output[0] = "y"
    g = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 2)])
    m.ir_version = 10
    return m


def test_widening_steps_over_many_rows_keep_every_bit() -> None:
    """Each step writes more bytes than it reads, over many rows: a step writing where the step before's output
    still has to be read (or into a buffer that moved) would change the result."""
    rng = np.random.default_rng(9)
    feeds = [{"x": rng.standard_normal((rows, 6)).astype(np.float32)} for rows in (1, 37, 300)]
    prepared = _same_bits(_mlp([6, 48, 96, 160, 10]), feeds)
    assert [n.op_type for n in prepared.graph.node] == ["QChain"]


def test_unchain_gives_back_the_nodes_the_chain_replaced() -> None:
    m = _net(["conv", "pool", "conv", "dense", "head"])
    plain = prepared_without(m, STEP)
    fused = fuse_integer_chain(plain)
    assert len(fused.graph.node) < len(plain.graph.node)
    got, want = unchain(fused), list(plain.graph.node)
    assert [onnx.helper.printable_node(n) for n in got] == [onnx.helper.printable_node(n) for n in want]
    assert [n.name for n in got] == [n.name for n in want]
    for a, b in zip(got, want, strict=True):
        assert sorted(x.SerializeToString() for x in a.attribute) == sorted(x.SerializeToString() for x in b.attribute)


@pytest.mark.parametrize("name", ["labs_gtsrb12_w2a3", "tiny_kws_w3a3", "zoo_qkeras_jettagging"])
def test_published_models_chain_and_keep_every_bit(name: str) -> None:
    path = CORPUS / f"{name}.onnx"
    if not path.exists():
        pytest.skip(f"the real-world corpus is not at {CORPUS} (set ORTQUANT_REALWORLD)")
    m = onnx.load(path)
    (inp,) = [i for i in m.graph.input if i.name not in {t.name for t in m.graph.initializer}]
    shape = [d.dim_value or 1 for d in inp.type.tensor_type.shape.dim]
    rng = np.random.default_rng(2)
    feeds = [{inp.name: rng.standard_normal(shape).astype(np.float32)} for _ in range(3)]
    prepared = _same_bits(m, feeds)
    assert any(n.op_type in ("QChain", "QChainCodes") for n in prepared.graph.node)


@pytest.mark.parametrize(
    "case",
    [
        "graph_output",  # the value between two layers is also a graph output
        "two_readers",  # it is read by a second node
        "single_layer",
    ],
)
def test_a_value_read_elsewhere_stays_outside_the_chains(case: str) -> None:
    """The first layer's output is also a graph output, or also read by another node: no chain takes it in (the
    layers after it may still chain); a single layer is no chain."""
    if case == "graph_output":
        m, seen = _net(["conv", "conv", "conv", "head"], extra_output="q1"), "q1"
    elif case == "two_readers":
        m, seen = _net(["conv", "conv", "conv", "head"]), "also"
        m.graph.node.append(helper.make_node("Identity", ["q1"], ["also"]))
        m.graph.output.append(helper.make_tensor_value_info("also", TensorProto.FLOAT, None))
    else:
        m, seen = _net(["head"]), "y"
    prepared = _same_bits(m, [_feeds(2)])
    assert any(seen in n.output for n in prepared.graph.node)
    plain = prepared_without(m, STEP)
    if case == "single_layer":
        assert fuse_integer_chain(plain) is plain
        return
    first = next(n for n in plain.graph.node if n.domain == "ortquant.integer")
    assert first in list(prepared.graph.node)  # the first layer keeps its own node
    assert any(n.op_type in ("QChain", "QChainCodes") for n in prepared.graph.node)


def test_a_residual_layer_is_not_a_step() -> None:
    m = _net(["conv", "conv", "conv", "head"], shortcut=True)
    prepared = _same_bits(m, [_feeds(2)])
    ops = [(n.op_type, len(n.input)) for n in prepared.graph.node]
    # The first layer's codes are read twice (the next layer's X and R); the layer that adds the shortcut keeps its
    # own node (R is not a constant); the two after it chain.
    assert ops == [("QConvCodes", 4), ("QConvCodes", 5), ("QChain", 7)], ops


def test_the_onnx_checker_and_shape_inference_take_a_chain() -> None:
    from ortquant.schemas import register_schemas

    register_schemas()
    m = _net(["conv", "pool", "conv", "dense", "head"], batch=2)
    prepared = ortquant.prepare_model(m, integer=True)
    onnx.checker.check_model(prepared, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(prepared, strict_mode=True)
    (y,) = [o for o in inferred.graph.output if o.name == "y"]
    assert [d.dim_value for d in y.type.tensor_type.shape.dim] == [2, 10]


def test_one_session_runs_from_two_threads() -> None:
    m = _net(["conv", "pool", "conv", "dense", "head"])
    sess = ortquant.InferenceSession(m, integer=True)
    feeds = [_feeds(1 + i % 3, seed=i) for i in range(8)]
    want = [sess.run(None, f)[0] for f in feeds]
    errors: list[str] = []

    def work(k: int) -> None:
        for _ in range(50):
            for i in range(k, len(feeds), 2):
                got = sess.run(None, feeds[i])[0]
                if not np.array_equal(got, want[i]):
                    errors.append(f"thread {k}, input {i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]


def _chain_node(prepared: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in prepared.graph.node if n.op_type in ("QChain", "QChainCodes"))


def _set(node: onnx.NodeProto, name: str, value: object) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute(name, value)])


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda n: _set(n, "steps", "QConvCodes"), r"attribute 'steps' must name 2 to 256 ops separated by spaces"),
        (lambda n: _set(n, "steps", "QConvCodes Relu QGemm"), r"step 1 is 'Relu'; a step is one of QConv,"),
        (lambda n: _set(n, "step_inputs", [3, 3]), r"attribute 'step_inputs' must have one count per step \(3\)"),
        (lambda n: _set(n, "step_inputs", [3, 2, 4]), r"step 1 \(QConvCodes\) takes 3 constant inputs, got 2"),
        (lambda n: _set(n, "steps", "QConvCodes QConvCodes QConv"), r"step 2 \(QConv 'y'\): input W must be 4-D"),
        (
            lambda n: _set(n, "__1_act_bits", 99),
            r"step 1 \(QConvCodes 'c1'\): the activation bit width must be 1 \.\. ",
        ),
        (lambda n: n.input.append(n.input[1]), r"the steps take 10 inputs \(attribute 'step_inputs'\), the node has "),
    ],
)
def test_a_malformed_chain_is_refused_in_one_line(edit, message: str) -> None:
    prepared = ortquant.prepare_model(_net(["conv", "conv", "head"]), integer=True)
    edit(_chain_node(prepared))
    with pytest.raises(Exception, match=message) as e:
        ortquant.InferenceSession(prepared)
    assert "\n" not in str(e.value).strip()


def test_a_chain_whose_last_step_writes_codes_is_not_a_values_chain() -> None:
    prepared = ortquant.prepare_model(_net(["conv", "conv"], two_heads=True), integer=True)
    node = _chain_node(prepared)
    assert node.op_type == "QChainCodes"
    node.op_type = "QChain"  # (its reader, a Flatten, takes either type)
    with pytest.raises(Exception, match=r"QChain writes float32 values: its last step must be QConv, QGemm or "):
        ortquant.InferenceSession(prepared)


def test_a_step_error_at_run_time_names_the_step() -> None:
    """The first step told that X's grid is a declaration to check (act_check): an off-grid value is an error
    at run time, named by the step."""
    prepared = ortquant.prepare_model(_net(["conv", "conv", "head"]), integer=True)
    _set(_chain_node(prepared), "__0_act_check", "input 'x' (finn_datatype UINT4)")
    sess = ortquant.InferenceSession(prepared)
    x = np.zeros((1, 3, 4, 4), np.float32)
    sess.run(None, {"x": x})  # on the grid
    x[0, 0, 0, 1] = 0.013
    with pytest.raises(Exception, match=r"step 0 \(QConvCodes 'c0'\): input X holds 0\.013\d* at flat index 1"):
        sess.run(None, {"x": x})


@pytest.mark.parametrize("hw", [256, "hw"])
def test_large_or_unknown_values_between_layers_stay_nodes(hw: object) -> None:
    """A 256 x 256 image's codes (393 KiB per image, over MAX_STEP_BYTES) or a size onnx cannot infer: no chain."""
    m = _net(["conv", "conv", "conv"], hw=hw)
    prepared = _same_bits(m, [{"x": np.random.default_rng(0).standard_normal((1, 3, 256, 256)).astype(np.float32)}])
    ops = [n.op_type for n in prepared.graph.node if n.domain == "ortquant.integer"]
    assert ops == ["QConvCodes", "QConvCodes", "QConv"], ops
