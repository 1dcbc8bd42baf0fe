"""fold_constant_shapes: integer shape computations on constant initializers become initializers holding what
onnxruntime computes for the same nodes (the reference: the unfolded graph run by onnxruntime, every node as
written). Then torch's TorchScript form of a reflect Pad (its pads computed by ConstantOfShape -> Concat -> Reshape
-> Slice -> Transpose -> Reshape -> Cast) in front of a QONNX layer through the public API in a fresh process: the
layer after the Pad is lowered in integer mode, with the default mode's values."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _integer_fixtures import lowered_in_fresh_process
from _oracle import IR_VERSION
from onnx import TensorProto, helper, numpy_helper

from ortquant.transforms.fold_constant_shapes import fold_constant_shapes

Q = "qonnx.custom_op.general"
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def _model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray], opset: int = 17) -> onnx.ModelProto:
    out = nodes[-1].output[0]
    g = helper.make_graph(
        nodes,
        "g",
        [],
        [helper.make_empty_tensor_value_info(out)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = IR_VERSION
    return m


def _ort(m: onnx.ModelProto) -> np.ndarray:
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # onnxruntime computes each node
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, {})[0]


def _check_folded(m: onnx.ModelProto) -> None:
    """Every node folds except the last (a graph output, so it stays), and the folded graph gives onnxruntime's
    values bit for bit."""
    want = _ort(m)
    new = fold_constant_shapes(m)
    assert [n.op_type for n in new.graph.node] == [m.graph.node[-1].op_type], [n.op_type for n in new.graph.node]
    got = _ort(new)
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()


X = np.arange(24, dtype=np.int64).reshape(2, 3, 4) - 7
SLICES = [
    # starts, ends, axes, steps
    ([0], [2], [2], [1]),
    ([-1], [I64_MIN + 1], [0], [-1]),  # torch's reversal of the pad pairs
    ([1, -3], [100, -1], [1, 2], [1, 2]),
    ([3, 2], [-100, 0], [2, 1], [-2, -1]),
    ([-10], [10], [-1], [3]),
    ([5], [1], [2], [1]),  # empty
    ([0, 0, 0], [I64_MAX, I64_MAX, I64_MAX], None, None),
]


@pytest.mark.parametrize("case", SLICES)
def test_slice_folds_as_onnxruntime_slices(case):
    starts, ends, axes, steps = case
    inits = {"x": X, "s": np.array(starts, np.int64), "e": np.array(ends, np.int64)}
    ins = ["x", "s", "e"]
    if axes is not None:
        inits["a"] = np.array(axes, np.int64)
        ins.append("a")
    if steps is not None:
        inits["t"] = np.array(steps, np.int64)
        ins.append("t")
    m = _model([helper.make_node("Slice", ins, ["y"]), helper.make_node("Identity", ["y"], ["z"])], inits)
    _check_folded(m)


def test_slice_with_attributes_before_opset_10():
    m = _model(
        [
            helper.make_node("Slice", ["x"], ["y"], starts=[1, -2], ends=[3, 100], axes=[1, 2]),
            helper.make_node("Identity", ["y"], ["z"]),
        ],
        {"x": X},
        opset=9,
    )
    _check_folded(m)


@pytest.mark.parametrize(
    ("shape", "allowzero"),
    [([-1, 2], 0), ([0, -1], 0), ([2, 0, 4], 0), ([4, 6], 1), ([24], 0), ([1, 1, -1], 0)],
)
def test_reshape_folds_as_onnxruntime_reshapes(shape, allowzero):
    m = _model(
        [
            helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=allowzero),
            helper.make_node("Identity", ["y"], ["z"]),
        ],
        {"x": X, "s": np.array(shape, np.int64)},
        opset=14,
    )
    _check_folded(m)


def test_the_other_ops_fold_as_onnxruntime_computes_them():
    value = helper.make_tensor("v", TensorProto.INT32, [1], [-5])
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["c"], value=value),  # int32 [2, 3]
        helper.make_node("Cast", ["c"], ["c64"], to=TensorProto.INT64),
        helper.make_node("Gather", ["x", "idx"], ["g"], axis=1),  # [2, 2, 4]: indices -1 and 0
        helper.make_node("Transpose", ["g"], ["t"], perm=[2, 0, 1]),  # [4, 2, 2]
        helper.make_node("Unsqueeze", ["c64", "ax0"], ["u"]),  # [1, 2, 3]
        helper.make_node("Squeeze", ["u", "ax0"], ["sq"]),  # [2, 3]
        helper.make_node("Reshape", ["t", "flat"], ["tf"]),
        helper.make_node("Reshape", ["sq", "flat"], ["sf"]),
        helper.make_node("Concat", ["tf", "sf"], ["cat"], axis=-1),
        helper.make_node("Cast", ["cat"], ["small"], to=TensorProto.INT16),
        helper.make_node("Identity", ["small"], ["out"]),
    ]
    inits = {
        "x": X,
        "shape": np.array([2, 3], np.int64),
        "idx": np.array([-1, 0], np.int64),
        "ax0": np.array([0], np.int64),
        "flat": np.array([-1], np.int64),
    }
    _check_folded(_model(nodes, inits))


def test_squeeze_and_unsqueeze_with_attribute_axes_before_opset_13():
    nodes = [
        helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, -1]),
        helper.make_node("Squeeze", ["u"], ["s"], axes=[0]),
        helper.make_node("Identity", ["s"], ["z"]),
    ]
    _check_folded(_model(nodes, {"x": X}, opset=11))


@pytest.mark.parametrize(
    ("nodes", "inits"),
    [
        # an index onnxruntime refuses at run time: it stays, for onnxruntime to report
        ([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)], {"x": X, "i": np.array([2], np.int64)}),
        # a reshape to another element count
        ([helper.make_node("Reshape", ["x", "s"], ["y"])], {"x": X, "s": np.array([5, 5], np.int64)}),
        # a value int32 cannot hold, and a cast to float: not integer shape arithmetic
        (
            [
                helper.make_node(
                    "Cast",
                    [
                        "x",
                    ],
                    ["y"],
                    to=TensorProto.INT8,
                )
            ],
            {"x": np.array([300], np.int64)},
        ),
        ([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)], {"x": X}),
        # float data
        ([helper.make_node("Transpose", ["x"], ["y"])], {"x": np.ones((2, 3), np.float32)}),
        # a float ConstantOfShape value
        ([helper.make_node("ConstantOfShape", ["x"], ["y"])], {"x": np.array([2, 2], np.int64)}),
        # larger than a shape computation
        (
            [
                helper.make_node(
                    "ConstantOfShape", ["x"], ["y"], value=helper.make_tensor("v", TensorProto.INT64, [1], [1])
                )
            ],
            {"x": np.array([64, 64], np.int64)},
        ),
        # an attribute the op does not have: onnxruntime refuses the node, so it stays
        ([helper.make_node("Transpose", ["x"], ["y"], axis=1)], {"x": X}),
    ],
)
def test_what_is_left_for_onnxruntime(nodes, inits):
    m = _model([*nodes, helper.make_node("Identity", ["y"], ["z"])], inits)
    assert fold_constant_shapes(m) is m


def test_public_api_lowers_the_layer_after_torchs_reflect_pad_in_a_fresh_process(tmp_path):
    rng = np.random.default_rng(4)
    inits = {
        "s_x": np.float32(0.05),
        "z": np.float32(0.0),
        "bits": np.float32(8.0),
        "w_f": rng.normal(0, 0.2, (5, 3, 3, 3)).astype(np.float32),
        "s_w": np.float32(0.03),
        "c4": np.array([4], np.int64),
        "pairs": np.array([2, 1, 2, 1], np.int64),
        "shape2": np.array([-1, 2], np.int64),
        "st": np.array([-1], np.int64),
        "en": np.array([I64_MIN + 1], np.int64),
        "ax": np.array([0], np.int64),
        "step": np.array([-1], np.int64),
        "flat": np.array([-1], np.int64),
    }
    zero = helper.make_tensor("v", TensorProto.INT64, [1], [0])
    nodes = [
        helper.make_node("Quant", ["x", "s_x", "z", "bits"], ["xq"], domain=Q, signed=1, narrow=0),
        helper.make_node("Quant", ["w_f", "s_w", "z", "bits"], ["wq"], domain=Q, signed=1, narrow=1),
        helper.make_node("ConstantOfShape", ["c4"], ["zeros"], value=zero),
        helper.make_node("Concat", ["pairs", "zeros"], ["cat"], axis=0),
        helper.make_node("Reshape", ["cat", "shape2"], ["r"], allowzero=0),
        helper.make_node("Slice", ["r", "st", "en", "ax", "step"], ["rev"]),
        helper.make_node("Transpose", ["rev"], ["t"], perm=[1, 0]),
        helper.make_node("Reshape", ["t", "flat"], ["p"], allowzero=0),
        helper.make_node("Cast", ["p"], ["pads"], to=TensorProto.INT64),
        helper.make_node("Pad", ["xq", "pads"], ["xp"], mode="reflect"),
        helper.make_node("Conv", ["xp", "wq"], ["y"], kernel_shape=[3, 3]),
    ]
    g = helper.make_graph(
        nodes,
        "reflect_pad",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 9, 11])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(Q, 1)])
    m.ir_version = IR_VERSION
    path = tmp_path / "reflect.onnx"
    onnx.save(m, path)
    lowered_in_fresh_process(path, (1, 3, 9, 11), (1, 5, 10, 12), "fold_constant_shapes", x_std=2.0)
