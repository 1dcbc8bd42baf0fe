"""The validating readers every transform reads a model through: each malformed attribute, input or initializer is a
ModelError naming the node (its name, or its first output), the attribute or input, and what was expected."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper

from ortquant.transforms import ModelError, _read


def _node(name: str = "n", **attrs: object) -> onnx.NodeProto:
    return helper.make_node("Conv", ["x", "w"], ["y"], name=name, **attrs)


def test_node_name_is_the_first_output_when_unnamed():
    assert _read.node_label(_node("")) == "Conv node 'y'"
    assert _read.node_label(_node("c")) == "Conv node 'c'"


@pytest.mark.parametrize(
    "reader,value,message",
    [
        (lambda n: _read.attr_int(n, "a", 0), "x", "Conv node 'n': attribute 'a' must be INT, got STRING"),
        (lambda n: _read.attr_int(n, "a", 0), [1, 2], "attribute 'a' must be INT, got INTS"),
        (lambda n: _read.attr_float(n, "a", 0.0), 1, "attribute 'a' must be FLOAT, got INT"),
        (lambda n: _read.attr_float(n, "a", 0.0), float("nan"), "attribute 'a' must be finite"),
        (lambda n: _read.attr_float(n, "a", 0.0), float("inf"), "attribute 'a' must be finite"),
        (lambda n: _read.attr_ints(n, "a", None), 3, "attribute 'a' must be INTS, got INT"),
        (lambda n: _read.attr_ints(n, "a", None, length=2), [1, 2, 3], "attribute 'a' must have 2 values, got 3"),
        (lambda n: _read.attr_string(n, "a", ""), 1.5, "attribute 'a' must be STRING, got FLOAT"),
        (lambda n: _read.attr_string(n, "a", ""), b"\xc3\x28", "attribute 'a' is not valid UTF-8"),
        (lambda n: _read.attr_bool(n, "a", True), 65, "attribute 'a' must be 0 or 1, got 65"),
    ],
)
def test_attribute_readers(reader, value, message):
    with pytest.raises(ModelError, match=message.replace("(", r"\(")):
        reader(_node(a=value))


def test_empty_ints_is_an_error_and_absent_is_the_default():
    node = _node()
    empty = AttributeProto()
    empty.name, empty.type = "strides", AttributeProto.INTS
    node.attribute.append(empty)
    with pytest.raises(ModelError, match="Conv node 'n': attribute 'strides' is an empty list of ints"):
        _read.attr_ints(node, "strides", None)
    assert _read.attr_ints(node, "pads", [0, 0]) == [0, 0]
    assert _read.attr_int(node, "group", 1) == 1
    assert _read.attr_string(node, "auto_pad", "NOTSET") == "NOTSET"
    assert _read.attr_string(_node(auto_pad="VALID"), "auto_pad") == "VALID"


def test_missing_input_names_the_node_and_the_input():
    node = helper.make_node("Gemm", ["a"], ["y"], name="fc")
    with pytest.raises(ModelError, match=r"Gemm node 'fc': input 1 \(the weight\) is missing; the node has 1 inputs"):
        _read.input_name(node, 1, "the weight")
    assert _read.input_name(node, 0, "A") == "a"


def _tensor(a: np.ndarray, name: str = "w") -> TensorProto:
    return numpy_helper.from_array(a, name)


def test_tensor_array_reads_valid_tensors():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(_read.tensor_array(_tensor(a)), a)
    typed = helper.make_tensor("t", TensorProto.INT64, [3], [1, 2, 3])  # typed field, not raw data
    np.testing.assert_array_equal(_read.tensor_array(typed), [1, 2, 3])


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda t: setattr(t, "raw_data", t.raw_data[:-3]), "raw data has 21 bytes, its dims \\[2, 3\\] need 24"),
        (lambda t: setattr(t, "raw_data", t.raw_data + b"\0"), "raw data has 25 bytes"),
        (lambda t: t.dims.__setitem__(0, -2), "negative dimensions"),
        (lambda t: setattr(t, "data_type", 999), "unknown element type 999"),
        (lambda t: setattr(t, "data_location", TensorProto.EXTERNAL), "stored as external data"),
    ],
)
def test_tensor_array_refuses_malformed_tensors(change, message):
    t = _tensor(np.zeros((2, 3), np.float32))
    change(t)
    node = _node("")
    with pytest.raises(ModelError, match=f"Conv node 'y': the weight initializer 'w'.*{message}"):
        _read.tensor_array(t, node, "the weight")


def test_typed_data_of_the_wrong_count():
    t = helper.make_tensor("t", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])
    del t.float_data[-1]
    with pytest.raises(ModelError, match="initializer 't'"):
        _read.tensor_array(t)


def test_standard_node_problem():
    model = helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[helper.make_opsetid("", 17)])
    assert _read.standard_node_problem(helper.make_node("Relu", ["a"], ["b"], name="r"), model) is None
    bad = helper.make_node("Relu", ["a"], ["b"], name="r", momentum=0.5)
    assert "Relu node 'r'" in (_read.standard_node_problem(bad, model) or "")
    bn = helper.make_node("BatchNormalization", ["a", "b", "c", "d"], ["e"], name="bn")
    assert "input size 4" in (_read.standard_node_problem(bn, model) or "")
