"""Graph transforms: one pure ``ModelProto -> ModelProto`` function per file, composed by :func:`prepare_model`.

Every transform returns its input object unchanged when it has nothing to do (so a model that needs no rewrite
is never copied), and a rewritten copy otherwise; checks raise :class:`ModelError` naming the node. The order
below is the one ``prepare_model`` (and ``ortquant prepare``) applies; each entry says when it runs.

To add a transform: write ``transforms/<name>.py`` with one public function, add it to ``PIPELINE`` at the place
its inputs are ready, give it ``tests/transforms/test_<name>.py``, and list it in docs/ops.md.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import onnx

from ortquant.transforms._util import ModelError
from ortquant.transforms.channels_last import rewrite_channels_last
from ortquant.transforms.check_trunc import check_trunc_versions
from ortquant.transforms.declared_types import fix_declared_types
from ortquant.transforms.drop_unused_initializers import drop_unused_initializers
from ortquant.transforms.explicit_pads import explicit_pads
from ortquant.transforms.fold_constant_arith import fold_constant_arith
from ortquant.transforms.fold_constant_shapes import fold_constant_shapes
from ortquant.transforms.fold_weight_quantizers import fold_weight_quantizers
from ortquant.transforms.initializer_inputs import constant_initializers
from ortquant.transforms.int8_relu import rewrite_int8_relu
from ortquant.transforms.int_maxpool_pads import rewrite_int_maxpool_pads
from ortquant.transforms.integer_avgpool_codes import fuse_integer_avgpool_codes
from ortquant.transforms.integer_bias_add import fuse_integer_bias_add
from ortquant.transforms.integer_chain import fuse_integer_chain
from ortquant.transforms.integer_channels_last import fuse_integer_channels_last
from ortquant.transforms.integer_code_flow import flow_integer_codes
from ortquant.transforms.integer_codes import fuse_integer_codes
from ortquant.transforms.integer_depth_to_space import fuse_integer_depth_to_space
from ortquant.transforms.integer_flatten import fuse_integer_flatten
from ortquant.transforms.integer_leaky_relu import fuse_integer_leaky_relu
from ortquant.transforms.integer_maxpool import fuse_integer_maxpool
from ortquant.transforms.integer_residual import fuse_integer_residual
from ortquant.transforms.integer_squeeze_pairs import cancel_squeeze_pairs
from ortquant.transforms.ir_version import fit_ir_version
from ortquant.transforms.legacy_domains import fix_legacy_domains
from ortquant.transforms.lower_integer import lower_integer
from ortquant.transforms.transpose_pairs import cancel_transpose_pairs
from ortquant.transforms.transpose_sink import sink_transposes


@dataclass(frozen=True)
class PrepareOptions:
    """What the caller asked for: ``exact`` reproduces qonnx bit for bit, ``integer`` lowers to the int8 engine,
    ``overridable_initializers`` keeps initializers that are listed as graph inputs overridable at run time.

    The two contradict each other (integer mode computes exact sums, qonnx float32 ones): asking for both raises.
    """

    exact: bool = False
    integer: bool = False
    overridable_initializers: bool = False

    def __post_init__(self) -> None:
        if self.exact and self.integer:
            raise ValueError("exact=True and integer=True contradict each other: integer mode changes the numerics")


@dataclass(frozen=True)
class Transform:
    """One pipeline step: its name (as ``ortquant check`` reports it), the function, and when it applies."""

    name: str
    fn: Callable[[onnx.ModelProto], onnx.ModelProto]
    when: Callable[[PrepareOptions], bool] = lambda _opts: True


# Domains first (every later step sees QONNX nodes in their canonical domain), then the checks, then the type
# fixes (the int8 rewrites read element types), then the rewrites.
PIPELINE: list[Transform] = [
    # A model stamped with an IR version newer than onnxruntime reads (onnx 1.23's default, 14), using nothing of
    # it, gets the IR version that holds what it uses.
    Transform("fit_ir_version", fit_ir_version),
    # Weights listed as graph inputs become constants (unless the caller feeds them): every later step, onnxruntime's
    # optimizations and integer mode then see constant weights.
    Transform("constant_initializers", constant_initializers, lambda o: not o.overridable_initializers),
    Transform("fix_legacy_domains", fix_legacy_domains),
    Transform("check_trunc_versions", check_trunc_versions),
    Transform("fix_declared_types", fix_declared_types),
    Transform("rewrite_channels_last", rewrite_channels_last),
    # After it: the Transpose pairs it leaves around QONNX quantizers between two layers (onnxruntime cancels
    # pairs around its own ops only).
    Transform("cancel_transpose_pairs", cancel_transpose_pairs),
    # Then the Transposes left around skip connections and upsampling move down (past per-element ops, nearest
    # Resize, Concat) to their inverse.
    Transform("sink_transposes", sink_transposes),
    Transform("rewrite_int8_relu", rewrite_int8_relu),
    Transform("rewrite_int_maxpool_pads", rewrite_int_maxpool_pads),
    # Integer shape computations on constants (the pads of torch's reflect Pad) fold, so that the grid analysis
    # sees the operands as constants.
    Transform("fold_constant_shapes", fold_constant_shapes),
    # Arithmetic on constants (a bias quantizer's Ceil-computed bit width) folds, so that the quantizers behind it
    # have constant inputs for the integer lowering and the weight-quantizer fold.
    Transform("fold_constant_arith", fold_constant_arith),
    # Integer mode: auto_pad (SAME_UPPER / SAME_LOWER / VALID) becomes the explicit pads onnxruntime computes, which
    # the lowering and the grid rules read.
    Transform("explicit_pads", explicit_pads, lambda o: o.integer),
    # Integer mode: quantized Conv/MatMul/Gemm layers -> ortquant.integer ops (reads the weight quantizers).
    Transform("lower_integer", lower_integer, lambda o: o.integer),
    # Integer mode: a constant bias Add (and a Relu) right after a lowered layer go into its B (and relu).
    Transform("fuse_integer_bias_add", fuse_integer_bias_add, lambda o: o.integer),
    # Integer mode: a LeakyRelu right after a QConv is applied inside the op (before the fusions below).
    Transform("fuse_integer_leaky_relu", fuse_integer_leaky_relu, lambda o: o.integer),
    # Integer mode: a MaxPool right after a QConv pools inside the op (each image's output while in cache).
    Transform("fuse_integer_maxpool", fuse_integer_maxpool, lambda o: o.integer),
    # Integer mode: a DepthToSpace (and a Relu) right after a QConv shuffles inside the op.
    Transform("fuse_integer_depth_to_space", fuse_integer_depth_to_space, lambda o: o.integer),
    # Integer mode: a residual Add (and its Relu) behind a QConv adds inside the op.
    Transform("fuse_integer_residual", fuse_integer_residual, lambda o: o.integer),
    # Integer mode, after the fusions: a QConv read only by QConv layers of one quantizer writes their int8 codes.
    Transform("fuse_integer_codes", fuse_integer_codes, lambda o: o.integer),
    # Integer mode: int8 codes through the quantizers, LeakyRelu, max pools, nearest resizes and concats between
    # layers (the steps per element folded into the producer's table).
    Transform("flow_integer_codes", flow_integer_codes, lambda o: o.integer),
    # Integer mode: an average pool behind a QConv's quantizer sums the quantizer's int8 codes.
    Transform("fuse_integer_avgpool_codes", fuse_integer_avgpool_codes, lambda o: o.integer),
    # Integer mode: a Transpose to channels-last right after a QConv writes its output in that layout.
    Transform("fuse_integer_channels_last", fuse_integer_channels_last, lambda o: o.integer),
    # Integer mode: a Flatten (or a Reshape that flattens) read only by a QGemm: the op reads its input flattened.
    Transform("fuse_integer_flatten", fuse_integer_flatten, lambda o: o.integer),
    # Integer mode: the Squeeze -> Unsqueeze pairs between 1-D layers (run as 2-D ones of height 1) go.
    Transform("cancel_squeeze_pairs", cancel_squeeze_pairs, lambda o: o.integer),
    # Integer mode, last: consecutive integer-mode layers, each read only by the next, run as one QChain node
    # (onnxruntime's cost per node is as large as a small layer's arithmetic).
    Transform("fuse_integer_chain", fuse_integer_chain, lambda o: o.integer),
    # Then weight quantizers become initializers (after the integer lowering, which reads them), except for exact.
    Transform("fold_weight_quantizers", fold_weight_quantizers, lambda o: not o.exact),
    # Then the initializers no node reads any more go (onnxruntime would warn about each when loading the model).
    Transform("drop_unused_initializers", drop_unused_initializers),
]


def apply_pipeline(model: onnx.ModelProto, options: PrepareOptions) -> tuple[onnx.ModelProto, list[str]]:
    """Run every applicable transform in order; returns the model and the names of the ones that changed it."""
    changed = []
    for step in PIPELINE:
        if not step.when(options):
            continue
        new = step.fn(model)
        if new is not model:
            changed.append(step.name)
        model = new
    return model, changed


__all__ = ["PIPELINE", "ModelError", "PrepareOptions", "Transform", "apply_pipeline"]
