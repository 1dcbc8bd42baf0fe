"""QONNX Im2Col: C++ through onnxruntime vs the numpy reference (per-sample definition, decision 8) and vs qonnx
1.0.0 at batch 1 (qonnx interleaves samples for batch > 1 and needs a finn_datatype annotation)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import SPECIAL_F32, assert_bitexact, make_node_model, run_model, run_node
from ortquant.reference import qonnx_structural as ref

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
OP = "Im2Col"

# (input NHWC, kernel_size, stride, pad_amount [t, l, b, r], dilations, pad_value)
CASES = [
    ((1, 5, 6, 3), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 0),
    ((1, 5, 6, 3), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0),
    ((1, 7, 7, 2), (3, 2), (2, 3), (1, 0, 2, 1), (1, 1), -3),
    ((1, 9, 8, 4), (3, 3), (2, 2), (2, 2, 2, 2), (2, 3), 5),
    ((1, 1, 10, 3), (1, 3), (1, 1), (0, 1, 0, 1), (1, 1), 0),  # 1-D conv as 2-D (dummy H)
    ((1, 10, 1, 3), (4, 1), (3, 1), (0, 0, 0, 0), (1, 1), 0),  # dummy W
    ((1, 4, 4, 1), (4, 4), (1, 1), (0, 0, 0, 0), (1, 1), 0),  # kernel = input
    ((1, 6, 6, 5), (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 0),  # pointwise, strided
]


def _x(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    x = (rng.standard_normal(shape) * 3).astype(np.float32)
    flat = x.reshape(-1)
    k = min(flat.size, SPECIAL_F32.size)
    flat[:k] = SPECIAL_F32[:k]
    return x


def _attrs(kernel, stride, pads, dil, pad_value, shape) -> dict:
    return {
        "kernel_size": list(kernel),
        "stride": list(stride),
        "pad_amount": list(pads),
        "dilations": list(dil),
        "pad_value": pad_value,
        "input_shape": str(tuple(shape)),
    }


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("batch", [1, 3])
def test_ort_matches_reference(case, batch, rng):
    shape, kernel, stride, pads, dil, pad_value = case
    shape = (batch, *shape[1:])
    x = _x(rng, shape)
    (y,) = run_node(OP, DOMAINS[0], [x], attrs=_attrs(kernel, stride, pads, dil, pad_value, shape))
    assert_bitexact(y, ref.im2col(x, kernel, stride, pads, pad_value, dil))


@pytest.mark.parametrize("domain", DOMAINS)
def test_domains_defaults_and_threads(domain, rng):
    x = _x(rng, (4, 20, 20, 16))
    attrs = {"kernel_size": [3, 3], "stride": [1, 1], "input_shape": "(4, 20, 20, 16)"}
    for threads in (1, 2):
        (y,) = run_node(OP, domain, [x], attrs=attrs, threads=threads)
        assert_bitexact(y, ref.im2col(x, (3, 3), (1, 1)))


def test_input_shape_and_depthwise_are_not_used(rng):
    """qonnx uses input_shape for shape inference and depthwise for FINN conversion only."""
    x = _x(rng, (2, 5, 5, 3))
    attrs = {"kernel_size": [2, 2], "stride": [1, 1], "depthwise": 1, "input_shape": "(1, 9, 9, 9)"}
    (y,) = run_node(OP, DOMAINS[0], [x], attrs=attrs)
    assert_bitexact(y, ref.im2col(x, (2, 2), (1, 1)))
    (y,) = run_node(OP, DOMAINS[0], [x], attrs={"kernel_size": [2, 2], "stride": [1, 1]})
    assert_bitexact(y, ref.im2col(x, (2, 2), (1, 1)))


def test_dummy_dimension_with_padding_is_computed(rng):
    """qonnx 1.0.0 asserts kernel 1 and no padding along a size-1 axis; the per-sample definition is computed."""
    x = _x(rng, (2, 1, 6, 3))
    attrs = _attrs((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 7, x.shape)
    (y,) = run_node(OP, DOMAINS[0], [x], attrs=attrs)
    assert_bitexact(y, ref.im2col(x, (3, 3), (1, 1), (1, 1, 1, 1), 7))


def test_constant_node_is_folded_and_exact(rng):
    x = _x(rng, (2, 5, 4, 3))
    model, _ = make_node_model(OP, DOMAINS[0], [x], const=True, attrs={"kernel_size": [2, 3], "stride": [1, 2]})
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.im2col(x, (2, 3), (1, 2)))


def test_empty_batch_and_channels(rng):
    attrs = {"kernel_size": [2, 2], "stride": [1, 1]}
    (y,) = run_node(OP, DOMAINS[0], [np.zeros((0, 4, 4, 3), np.float32)], attrs=attrs)
    assert y.shape == (0, 3, 3, 12)
    (y,) = run_node(OP, DOMAINS[0], [np.zeros((2, 4, 4, 0), np.float32)], attrs=attrs)
    assert y.shape == (2, 3, 3, 0)


# ---- vs qonnx 1.0.0 -------------------------------------------------------------------------------------


def _annotated_graph(name: str, datatype: str) -> onnx.GraphProto:
    """A graph that carries the finn_datatype annotation qonnx's Im2Col reads for its input."""
    graph = helper.make_graph([], "g", [], [])
    ann = onnx.TensorAnnotation()
    ann.tensor_name = name
    kv = ann.quant_parameter_tensor_names.add()
    kv.key = "finn_datatype"
    kv.value = datatype
    graph.quantization_annotation.append(ann)
    return graph


def _qonnx_im2col(x: np.ndarray, attrs: dict) -> np.ndarray:
    node = qonnx_node(OP, 1, **attrs)
    return qonnx_execute(node, [x], _annotated_graph("in0", "FLOAT32"))


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
@pytest.mark.parametrize("case", CASES)
def test_against_qonnx_batch1(case, rng):
    shape, kernel, stride, pads, dil, pad_value = case
    x = _x(rng, shape)
    attrs = _attrs(kernel, stride, pads, dil, pad_value, shape)
    want = _qonnx_im2col(x, attrs)
    (got,) = run_node(OP, DOMAINS[0], [x], attrs=attrs)
    assert_bitexact(got, want.astype(np.float32))
    assert want.dtype == np.float32


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
def test_batch_is_per_sample_where_qonnx_interleaves(rng):
    """For batch > 1 ortquant stacks qonnx's own batch-1 results; qonnx 1.0.0's batch result differs (its final
    reshape interleaves samples and pixels)."""
    x = _x(rng, (3, 5, 6, 2))
    attrs = _attrs((3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 0, x.shape)
    (got,) = run_node(OP, DOMAINS[0], [x], attrs=attrs)
    per_sample = np.concatenate([_qonnx_im2col(x[i : i + 1], attrs) for i in range(3)])
    assert_bitexact(got, per_sample.astype(np.float32))
    qonnx_batch = _qonnx_im2col(x, attrs)
    assert qonnx_batch.shape == got.shape and not np.array_equal(qonnx_batch, got, equal_nan=True)


# ---- bad input ------------------------------------------------------------------------------------------


def _error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


@pytest.mark.parametrize(
    "attrs,name",
    [
        ({"kernel_size": [3], "stride": [1, 1]}, "kernel_size"),
        ({"kernel_size": [3, 3, 3], "stride": [1, 1]}, "kernel_size"),
        ({"kernel_size": [0, 3], "stride": [1, 1]}, "kernel_size"),
        ({"kernel_size": [3, 3], "stride": [1]}, "stride"),
        ({"kernel_size": [3, 3], "stride": [1, 0]}, "stride"),
        ({"kernel_size": [3, 3]}, "stride"),
        ({"stride": [1, 1]}, "kernel_size"),
        ({"kernel_size": [3, 3], "stride": [1, 1], "pad_amount": [1, 1]}, "pad_amount"),
        ({"kernel_size": [3, 3], "stride": [1, 1], "pad_amount": [1, -1, 1, 1]}, "pad_amount"),
        ({"kernel_size": [3, 3], "stride": [1, 1], "dilations": [1, 0]}, "dilations"),
        ({"kernel_size": [3, 3], "stride": [1, 1], "dilations": [2]}, "dilations"),
        ({"kernel_size": [3, 3], "stride": [1, 1], "depthwise": 2}, "depthwise"),
        ({"kernel_size": [3, 3], "stride": [1, 1], "pad_value": 1.5}, "pad_value"),
        ({"kernel_size": 3, "stride": [1, 1]}, "kernel_size"),
    ],
)
def test_bad_attributes_fail_at_session_creation(attrs, name):
    model, _ = make_node_model(OP, DOMAINS[0], [np.ones((1, 5, 5, 2), np.float32)], attrs=attrs)
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    assert "im2col_node" in str(e.value) and f"'{name}'" in str(e.value)


def test_runtime_shape_errors():
    attrs = {"kernel_size": [3, 3], "stride": [1, 1]}
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((5, 5, 2), np.float32)], attrs=attrs))
    assert "im2col_node" in msg and "4-D" in msg
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((1, 2, 5, 2), np.float32)], attrs=attrs))
    assert "im2col_node" in msg and "does not fit" in msg


def test_wrong_dtype_and_input_count():
    attrs = {"kernel_size": [1, 1], "stride": [1, 1]}
    msg = _error(make_node_model(OP, DOMAINS[0], [np.ones((1, 2, 2, 1))], attrs=attrs))
    assert "im2col_node" in msg and "double" in msg
    x = np.ones((1, 2, 2, 1), np.float32)
    msg = _error(make_node_model(OP, DOMAINS[0], [x, x], attrs=attrs))
    assert "im2col_node" in msg
