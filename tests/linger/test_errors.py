"""Bad input to the linger ops: errors at session creation (attributes) or run time (dtypes, shapes) that name
the node and the cause (decision 2)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from linger_util import session_error

T = onnx.TensorProto
X8 = np.zeros((2, 3), np.int8)
XF = np.zeros((2, 3), np.float32)


def check(msg: str, node: str, *causes: str) -> None:
    # ortquant's messages say "<Op> node '<name>': ..."; onnxruntime's own type check says "node (<name>)".
    assert f"node '{node}'" in msg or f"node ({node})" in msg, msg
    for c in causes:
        assert c in msg, msg


def test_missing_required_attributes():
    check(session_error("Quant", [XF], {"data_bits": 8}), "quant_node", "scale_x", "missing")
    check(session_error("Requant", [X8], {"scale_x": 1.0, "scale_o": 2.0, "o_bits": 8}), "requant_node", "data_bits")
    check(session_error("iqAdd", [X8, X8], {"scale_x": 1.0, "scale_o": 1.0}), "iqadd_node", "scale_y")
    check(session_error("iqCat", [X8, X8], {"scale_x_0": 1.0, "scale_o": 1.0, "dim": 0}), "iqcat_node", "scale_x_1")
    check(session_error("iqCat", [X8], {"scale_x_0": 1.0, "scale_o": 1.0}), "iqcat_node", "'dim'")
    check(session_error("iqClamp", [X8], {"scale_x": 1.0, "scale_o": 1.0, "min": 0.0}), "iqclamp_node", "'max'")
    check(session_error("Dequant", [X8], {}, out_dtype=T.FLOAT), "dequant_node", "scale_o")
    check(
        session_error("AvgPool2dInt", [np.zeros((1, 1, 4, 4), np.int8)], {"scale_x": 1.0}),
        "avgpool2dint_node",
        "kernel_shape",
    )
    check(
        session_error("SoftmaxInt", [X8], {"scale_x": 1.0, "o_bits": 8, "scale_o": 256.0}), "softmaxint_node", "'dim'"
    )


@pytest.mark.parametrize("bad", [0.0, -4.0, float("nan"), float("inf")])
def test_non_positive_scales(bad):
    check(session_error("Quant", [XF], {"scale_x": bad}), "quant_node", "scale_x", "positive")
    attrs = {"scale_x": 1.0, "scale_y": bad, "scale_o": 1.0}
    check(session_error("iqMul", [X8, X8], attrs), "iqmul_node", "scale_y", "positive")
    check(
        session_error("iqCat", [X8, X8], {"scale_x_0": 1.0, "scale_x_1": bad, "scale_o": 1.0, "dim": 0}),
        "iqcat_node",
        "scale_x_1",
    )
    check(
        session_error("Requant", [X8], {"data_bits": 8, "o_bits": 8, "scale_x": bad, "scale_o": 1.0}),
        "requant_node",
        "scale_x",
    )


def test_unknown_platform_quant_and_modes():
    check(
        session_error("Quant", [XF], {"scale_x": 1.0, "platform_quant": "mlu_quant"}),
        "quant_node",
        "platform_quant",
        "mlu_quant",
    )
    check(
        session_error("iqAdd", [X8, X8], {"scale_x": 1.0, "scale_y": 1.0, "scale_o": 1.0, "mode": "t710_mode"}),
        "iqadd_node",
        "mode",
        "t710_mode",
    )
    check(session_error("iqPad", [X8, np.zeros(4, np.int64)], {"mode": "reflect"}), "iqpad_node", "reflect")
    check(session_error("iqSigmoid", [X8], {"scale_x": 1.0, "castor_mode": "venus"}), "iqsigmoid_node", "castor_mode")


def test_wrong_dtypes():
    check(
        session_error("iqAdd", [XF.astype(np.int16), X8], {"scale_x": 1.0, "scale_y": 1.0, "scale_o": 1.0}),
        "iqadd_node",
        "int16",
    )  # refused by onnxruntime's type check (x is declared int8)
    check(
        session_error("iqAdd", [X8, X8.astype(np.int32)], {"scale_x": 1.0, "scale_y": 1.0, "scale_o": 1.0}),
        "iqadd_node",
        "input y",
        "int32",
    )
    check(
        session_error("Requant", [X8], {"data_bits": 16, "o_bits": 8, "scale_x": 1.0, "scale_o": 1.0}),
        "requant_node",
        "int16",
        "data_bits=16",
    )
    check(session_error("iqTanh", [X8.astype(np.int32)], {"scale_x": 1.0}), "iqtanh_node", "int32")
    check(session_error("Relu", [X8.astype(np.int16)], {}, out_dtype=T.INT16), "relu_node", "int16")
    check(session_error("Dequant", [X8.astype(np.int64)], {"scale_o": 1.0}, out_dtype=T.FLOAT), "dequant_node", "int64")
    check(
        session_error("SoftmaxInt", [X8.astype(np.int16)], {"scale_x": 1.0, "dim": 0, "o_bits": 8, "scale_o": 1.0}),
        "softmaxint_node",
        "data_bits=8",
    )
    check(
        session_error(
            "BatchNorm2dInt",
            [np.zeros((1, 2, 2, 2), np.int8), np.ones(2, np.float32), np.ones(2, np.int32)],
            {"scale_x": 1.0, "scale_w": 1.0, "scale_o": 1.0},
            const=[False, True, True],
        ),
        "batchnorm2dint_node",
        "weight",
        "integer",
    )


def test_mismatched_iqcat_inputs():
    attrs = {"scale_x_0": 1.0, "scale_x_1": 1.0, "scale_o": 1.0, "dim": 1}
    check(session_error("iqCat", [X8, np.zeros((3, 3), np.int8)], attrs), "iqcat_node", "differs", "outside dim")
    check(session_error("iqCat", [X8, np.zeros((2, 3, 1), np.int8)], attrs), "iqcat_node", "rank")
    check(session_error("iqCat", [X8, X8], attrs | {"dim": 2}), "iqcat_node", "dim 2", "out of range")
    check(session_error("iqCat", [X8, X8], attrs | {"scale_x_2": 1.0}), "iqcat_node", "scale_x_2", "only 2 inputs")


def test_bad_shapes_and_values():
    attrs = {"scale_x": 1.0, "scale_y": 1.0, "scale_o": 1.0}
    check(session_error("iqMul", [X8, np.zeros((4,), np.int8)], attrs), "iqmul_node", "broadcast")
    check(session_error("iqPad", [X8, np.zeros(3, np.int64)], {}), "iqpad_node", "pads", "2 * rank")
    check(session_error("iqPad", [X8, np.array([0, -5, 0, 0], np.int64)], {}), "iqpad_node", "negative")
    check(session_error("iqSum", [X8], {"scale_x": 1.0, "scale_o": 1.0, "dims": 5}), "iqsum_node", "axis 5")
    check(
        session_error("iqClamp", [X8], {"scale_x": 1.0, "scale_o": 1.0, "min": 1.0, "max": 0.5}), "iqclamp_node", "min"
    )
    pool = {"kernel_shape": [3, 3], "scale_x": 1.0}
    check(session_error("AvgPool2dInt", [np.zeros((1, 1, 2, 2), np.int8)], pool), "avgpool2dint_node", "kernel")
    check(session_error("AvgPool2dInt", [X8], pool), "avgpool2dint_node", "4-D")
    check(
        session_error("AvgPool2dInt", [np.zeros((1, 1, 4, 4), np.int8)], pool | {"pads": [2, 2, 2, 2]}),
        "avgpool2dint_node",
        "half the kernel",
    )
    check(
        session_error("AvgPool2dInt", [np.zeros((1, 1, 4, 4), np.int8)], pool | {"o_bits": 16}),
        "avgpool2dint_node",
        "o_bits",
    )
    check(session_error("iqSigmoid", [X8], {"scale_x": 1.0, "scale_o": 256.0}), "iqsigmoid_node", "scale_o", "128")
    check(session_error("iqTanh", [X8], {"scale_x": 1.0, "table_len": 0}), "iqtanh_node", "table_len")
    check(session_error("SoftmaxInt", [X8], {"scale_x": 1.0, "dim": 0, "o_bits": 8}), "softmaxint_node", "together")
    check(
        session_error(
            "BatchNorm1dInt",
            [np.zeros((1, 2, 2, 2), np.int8), np.ones(2, np.int8), np.ones(2, np.int32)],
            {"scale_x": 1.0, "scale_w": 1.0, "scale_o": 1.0},
            const=[False, True, True],
        ),
        "batchnorm1dint_node",
        "(N, C)",
    )
    check(
        session_error(
            "BatchNorm2dInt",
            [np.zeros((1, 2, 2, 2), np.int8), np.ones(3, np.int8), np.ones(2, np.int32)],
            {"scale_x": 1.0, "scale_w": 1.0, "scale_o": 1.0},
            const=[False, True, True],
        ),
        "batchnorm2dint_node",
        "C = 2",
    )


def test_layernorm_is_refused_with_a_clear_message():
    msg = session_error(
        "LayerNormInt", [X8, np.ones(3, np.int8), np.ones(3, np.int32)], {"scale_x": 1.0}, const=[False, True, True]
    )
    check(msg, "layernormint_node", "not supported", "no reference semantics")


def test_output_type_that_contradicts_the_bits_attribute():
    # A graph output declared int8 for a 16-bit Quant: onnxruntime's type check names the node.
    msg = session_error("Quant", [XF], {"scale_x": 1.0, "data_bits": 16}, out_dtype=T.INT8)
    assert "quant_node" in msg or "out0" in msg, msg
