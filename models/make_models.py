"""Export the small Brevitas QONNX models in models/ and their qonnx reference outputs.

This script is the only place that needs torch and Brevitas; the tests and the demo only read the committed
``.onnx`` and ``.npz`` files. Run it from the repository root in a separate venv (not the project's .venv)::

    python3 -m venv /work/brevitas-venv
    /work/brevitas-venv/bin/pip install torch==2.13.0 brevitas==0.13.4 onnxoptimizer \
        qonnx==1.0.0 onnx==1.23.2 onnxruntime==1.31.1
    /work/brevitas-venv/bin/python models/make_models.py            # all models
    /work/brevitas-venv/bin/python models/make_models.py cnn_w4a4   # just one

It also writes ``models/as_exported/<name>.onnx`` for the AS_EXPORTED models: the file as ``export_qonnx`` wrote it,
without the cleanup, and an npz in the real-world corpus' format.

(``torch==2.13.0`` exactly: a plain ``torch`` pulls a multi-GB CUDA build.)

For every model it writes ``models/<name>.onnx`` (Brevitas ``export_qonnx``, dynamic batch dimension, then
qonnx's cleanup transformations, IR version 10) and ``models/<name>.npz`` with fixed random inputs at batch 1 and 4
(``input_b1``, ``input_b4``) and the outputs of qonnx's reference executor ``execute_onnx`` on them
(``output_b1``, ``output_b4``). Everything is seeded, so a rerun with the same versions gives the same files.
"""

from __future__ import annotations

import functools
import importlib.metadata
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx.helper

# onnx 1.23 writes IR version 14 by default, onnxruntime 1.31 reads at most 13, and qonnx's executor builds a
# one-node model per standard node with onnx.helper.make_model: default it to IR 10 (specs decision 17).
_make_model = onnx.helper.make_model


@functools.wraps(_make_model)
def _make_model_ir10(graph: onnx.GraphProto, **kwargs: object) -> onnx.ModelProto:
    kwargs.setdefault("ir_version", 10)
    return _make_model(graph, **kwargs)


onnx.helper.make_model = _make_model_ir10

import brevitas  # noqa: E402
import brevitas.nn as qnn  # noqa: E402
import onnxruntime  # noqa: E402
import torch  # noqa: E402
from brevitas.export import export_qonnx  # noqa: E402
from brevitas.graph.calibrate import calibration_mode  # noqa: E402
from brevitas.quant import (  # noqa: E402
    Fp8e4m3OCPActPerTensorFloat,
    Fp8e4m3OCPWeightPerChannelFloat,
    Int8ActPerTensorFixedPoint,
    Int8ActPerTensorFloat,
    Int8WeightPerChannelFloat,
    Int8WeightPerTensorFixedPoint,
    Int8WeightPerTensorFloat,
    Int16Bias,
    Int32Bias,
    SignedBinaryActPerTensorConst,
    SignedBinaryWeightPerTensorConst,
    TruncTo8bit,
    Uint8ActPerTensorFixedPoint,
    Uint8ActPerTensorFloat,
)
from brevitas.quant.shifted_scaled_int import ShiftedUint8ActPerTensorFloat, ShiftedUint8WeightPerChannelFloat  # noqa: E402
from qonnx.core.modelwrapper import ModelWrapper  # noqa: E402
from qonnx.core.onnx_exec import execute_onnx  # noqa: E402
from qonnx.transformation.change_batchsize import ChangeBatchSize  # noqa: E402
from qonnx.transformation.fold_constants import FoldConstants  # noqa: E402
from qonnx.transformation.general import (  # noqa: E402
    GiveReadableTensorNames,
    GiveUniqueNodeNames,
    GiveUniqueParameterTensors,
    RemoveStaticGraphInputs,
    RemoveUnusedTensors,
)
from qonnx.transformation.infer_shapes import InferShapes  # noqa: E402
from qonnx.transformation.quant_constant_folding import FoldTransposeIntoQuantInit  # noqa: E402
from torch import nn  # noqa: E402

HERE = Path(__file__).resolve().parent
QONNX_VERSION = importlib.metadata.version("qonnx")
IR_VERSION = 10
BATCHES = (1, 4)
# qonnx's cleanup_model keeps Quant and BipolarQuant on constant weights but folds every other constant node,
# so an FP8 weight's FloatQuant would disappear into a plain float initializer. We keep the quantizers as
# Brevitas wrote them, so ortquant runs them (decision 18: computed once at session creation).
PRESERVE = ["Quant", "IntQuant", "BipolarQuant", "FloatQuant", "Trunc", "QuantizeLinear", "DequantizeLinear"]


class TruncTo4bit(TruncTo8bit):
    """Brevitas truncation quantizer keeping the 4 most significant bits, rounding down (floor)."""

    bit_width = 4


class CnnW4A4(nn.Module):
    """3x32x32 -> 10: three Conv+BN+ReLU blocks (4-bit per-channel narrow weights, 4-bit unsigned activations),
    a 4x4 TruncAvgPool2d back to 4 bits (-> AveragePool + QONNX Trunc) and a 4-bit Linear head."""

    def __init__(self) -> None:
        super().__init__()
        w4 = {"weight_quant": Int8WeightPerChannelFloat, "weight_bit_width": 4, "bias": False}
        a4 = {"act_quant": Uint8ActPerTensorFloat, "bit_width": 4, "return_quant_tensor": True}
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.conv1 = qnn.QuantConv2d(3, 16, 3, padding=1, **w4)
        self.bn1 = nn.BatchNorm2d(16)
        self.relu1 = qnn.QuantReLU(**a4)
        self.conv2 = qnn.QuantConv2d(16, 32, 3, stride=2, padding=1, **w4)
        self.bn2 = nn.BatchNorm2d(32)
        self.relu2 = qnn.QuantReLU(**a4)
        self.conv3 = qnn.QuantConv2d(32, 32, 3, padding=1, **w4)
        self.bn3 = nn.BatchNorm2d(32)
        self.relu3 = qnn.QuantReLU(**a4)
        self.pool = qnn.TruncAvgPool2d(kernel_size=4, stride=4, trunc_quant=TruncTo4bit, return_quant_tensor=True)
        self.fc = qnn.QuantLinear(32 * 4 * 4, 10, weight_quant=Int8WeightPerChannelFloat, weight_bit_width=4, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        x = self.relu1(self.bn1(self.conv1(x)))
        x = self.relu2(self.bn2(self.conv2(x)))
        x = self.relu3(self.bn3(self.conv3(x)))
        x = self.pool(x)
        return self.fc(torch.flatten(x, 1))


class Fp8Mlp(nn.Module):
    """64 -> 32 -> 10 MLP in FP8 E4M3 (OCP): FP8 input/hidden activations (per-tensor scale) and FP8 weights
    (per-channel scale). Exported as QONNX FloatQuant."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Fp8e4m3OCPActPerTensorFloat, return_quant_tensor=True)
        self.fc1 = qnn.QuantLinear(64, 32, weight_quant=Fp8e4m3OCPWeightPerChannelFloat, bias=True)
        self.relu = nn.ReLU()
        self.hid = qnn.QuantIdentity(act_quant=Fp8e4m3OCPActPerTensorFloat, return_quant_tensor=True)
        self.fc2 = qnn.QuantLinear(32, 10, weight_quant=Fp8e4m3OCPWeightPerChannelFloat, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        x = self.hid(self.relu(self.fc1(x)))
        return self.fc2(x)


class BinaryMlp(nn.Module):
    """63 -> 31 -> 10 binarized MLP: binary (+-1) activations and binary (+-0.1) weights, BN between.

    Exported as QONNX BipolarQuant. Every BipolarQuant that follows an accumulator is made robust against
    summation order (the hazard in specs/qonnx.md section 2): both fan-ins are odd (63, 31), so a sum of
    +-0.1 products is an odd multiple of 0.1 and never near 0; the BN between has beta = 0 and running means
    that are even multiples of 0.1, so its sign change lies halfway between two reachable sums.
    """

    def __init__(self) -> None:
        super().__init__()
        b = {"weight_quant": SignedBinaryWeightPerTensorConst, "bias": False}
        self.inp = qnn.QuantIdentity(act_quant=SignedBinaryActPerTensorConst, return_quant_tensor=True)
        self.fc1 = qnn.QuantLinear(63, 31, **b)
        self.bn = nn.BatchNorm1d(31)
        self.hid = qnn.QuantIdentity(act_quant=SignedBinaryActPerTensorConst, return_quant_tensor=True)
        self.fc2 = qnn.QuantLinear(31, 10, **b)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        x = self.hid(self.bn(self.fc1(x)))
        return self.fc2(x)


class Int8ResBlock(nn.Module):
    """3x16x16 -> 10: 8-bit residual block with what the CNN lacks: an asymmetric input quantizer (zero-point),
    per-channel weight zero-points, a per-channel activation scale (1,C,1,1), a residual Add, MaxPool, and a
    6-bit activation with FLOOR rounding. Only QONNX Quant."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=ShiftedUint8ActPerTensorFloat, return_quant_tensor=True)
        self.conv1 = qnn.QuantConv2d(3, 8, 3, padding=1, weight_quant=ShiftedUint8WeightPerChannelFloat, bias=True)
        self.relu = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat)
        self.conv2 = qnn.QuantConv2d(8, 8, 3, padding=1, weight_quant=Int8WeightPerTensorFloat, bias=False)
        self.act2 = qnn.QuantIdentity(
            act_quant=Int8ActPerTensorFloat,
            scaling_per_output_channel=True,
            per_channel_broadcastable_shape=(1, 8, 1, 1),
            scaling_stats_permute_dims=(1, 0, 2, 3),
        )
        self.pool = nn.MaxPool2d(2)
        self.act3 = qnn.QuantIdentity(
            act_quant=Int8ActPerTensorFloat, bit_width=6, float_to_int_impl_type="floor", return_quant_tensor=True
        )
        self.fc = qnn.QuantLinear(8 * 8 * 8, 10, weight_quant=Int8WeightPerTensorFloat, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        r = self.relu(self.conv1(self.inp(x)))
        y = self.act2(self.conv2(r)) + r
        y = self.act3(self.pool(y))
        return self.fc(torch.flatten(y, 1))


class Cnn4c2f(nn.Module):
    """3x32x32 -> 10, the integer-mode benchmark network: four Conv(3x3)+BN+ReLU layers (32, 32, 64, 64 channels,
    a MaxPool(2) after the second and the fourth), then Linear(4096 -> 128)+BN+ReLU and Linear(128 -> 10).
    4-bit per-channel narrow weights and 4-bit unsigned activations throughout, an 8-bit signed input quantizer."""

    def __init__(self) -> None:
        super().__init__()
        w4 = {"weight_quant": Int8WeightPerChannelFloat, "weight_bit_width": 4, "bias": False}
        a4 = {"act_quant": Uint8ActPerTensorFloat, "bit_width": 4, "return_quant_tensor": True}
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        chans = [(3, 32), (32, 32), (32, 64), (64, 64)]
        self.convs = nn.ModuleList(qnn.QuantConv2d(i, o, 3, padding=1, **w4) for i, o in chans)
        self.bns = nn.ModuleList(nn.BatchNorm2d(o) for _, o in chans)
        self.acts = nn.ModuleList(qnn.QuantReLU(**a4) for _ in chans)
        self.pool = nn.MaxPool2d(2)
        self.fc1 = qnn.QuantLinear(64 * 8 * 8, 128, **w4)
        self.bn_fc = nn.BatchNorm1d(128)
        self.act_fc = qnn.QuantReLU(**a4)
        self.fc2 = qnn.QuantLinear(128, 10, weight_quant=Int8WeightPerChannelFloat, weight_bit_width=4, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        for i, (conv, bn, act) in enumerate(zip(self.convs, self.bns, self.acts, strict=True)):
            x = act(bn(conv(x)))
            if i in (1, 3):
                x = self.pool(x)
        x = self.act_fc(self.bn_fc(self.fc1(torch.flatten(x, 1))))
        return self.fc2(x)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        w = {"weight_quant": Int8WeightPerChannelFloat, "weight_bit_width": 6, "bias": False}
        self.conv1 = qnn.QuantConv2d(cin, cout, 3, stride=stride, padding=1, **w)
        self.bn1 = nn.BatchNorm2d(cout)
        self.act1 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=6, return_quant_tensor=True)
        self.conv2 = qnn.QuantConv2d(cout, cout, 3, padding=1, **w)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = qnn.QuantConv2d(cin, cout, 1, stride=stride, **w)
            self.bn_down = nn.BatchNorm2d(cout)
        self.act2 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=6, return_quant_tensor=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn2(self.conv2(self.act1(self.bn1(self.conv1(x)))))
        skip = self.bn_down(self.down(x)) if self.down is not None else x
        return self.act2(y + skip)


class ResNetMini(nn.Module):
    """3x32x32 -> 10 ResNet-style network: a stem Conv+BN+ReLU (16 channels), three residual blocks (16 -> 16,
    16 -> 32 stride 2 with a 1x1 projection shortcut, 32 -> 32) whose Adds are followed by a 6-bit unsigned ReLU,
    global average pooling, a 8-bit activation and a Linear head. 6-bit per-channel weights, 6-bit activations."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.stem = qnn.QuantConv2d(
            3, 16, 3, padding=1, weight_quant=Int8WeightPerChannelFloat, weight_bit_width=6, bias=False
        )
        self.bn = nn.BatchNorm2d(16)
        self.act = qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=6, return_quant_tensor=True)
        self.blocks = nn.Sequential(_ResBlock(16, 16, 1), _ResBlock(16, 32, 2), _ResBlock(32, 32, 1))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.pool_q = qnn.QuantIdentity(act_quant=Uint8ActPerTensorFloat, return_quant_tensor=True)
        self.fc = qnn.QuantLinear(32, 10, weight_quant=Int8WeightPerChannelFloat, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.bn(self.stem(self.inp(x))))
        x = self.blocks(x)
        x = self.pool_q(self.pool(x))
        return self.fc(torch.flatten(x, 1))


class MixedBits(nn.Module):
    """3x16x16 -> 10 with 2- to 8-bit layers: Conv w8/a8 (signed input), Conv w3 on a 5-bit activation, Conv w5
    on a 2-bit activation (HALF_EVEN) , Conv w2 on a 3-bit activation, then Linear w6 on a 7-bit activation and
    Linear w8 on a 4-bit one. Per-channel and per-tensor weight scales, BN after the convolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)

        def conv(cin: int, cout: int, wb: int, per_channel: bool, stride: int = 1) -> nn.Module:
            wq = Int8WeightPerChannelFloat if per_channel else Int8WeightPerTensorFloat
            return qnn.QuantConv2d(
                cin, cout, 3, stride=stride, padding=1, weight_quant=wq, weight_bit_width=wb, bias=False
            )

        def relu(bits: int) -> nn.Module:
            return qnn.QuantReLU(act_quant=Uint8ActPerTensorFloat, bit_width=bits, return_quant_tensor=True)

        self.c1, self.b1, self.a1 = conv(3, 16, 8, True), nn.BatchNorm2d(16), relu(5)
        self.c2, self.b2, self.a2 = conv(16, 16, 3, True), nn.BatchNorm2d(16), relu(2)
        self.c3, self.b3, self.a3 = conv(16, 24, 5, False, 2), nn.BatchNorm2d(24), relu(3)
        self.c4, self.b4, self.a4 = conv(24, 24, 2, True), nn.BatchNorm2d(24), relu(7)
        self.fc1 = qnn.QuantLinear(
            24 * 8 * 8, 64, weight_quant=Int8WeightPerChannelFloat, weight_bit_width=6, bias=True
        )
        self.a5 = relu(4)
        self.fc2 = qnn.QuantLinear(64, 10, weight_quant=Int8WeightPerTensorFloat, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        x = self.a1(self.b1(self.c1(x)))
        x = self.a2(self.b2(self.c2(x)))
        x = self.a3(self.b3(self.c3(x)))
        x = self.a4(self.b4(self.c4(x)))
        x = self.a5(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


class AttnW8A8(nn.Module):
    """8x16 tokens -> 4: one self-attention block in 8 bits, the way Brevitas users quantize a transformer layer:
    8-bit per-tensor Linear projections q, k, v with 8-bit signed activations after each, q @ k^T (a product of two
    quantized activations), Softmax, an 8-bit unsigned quantizer on the probabilities, their product with v, an
    output projection, the mean over the tokens and a Linear head."""

    def __init__(self, d: int = 16) -> None:
        super().__init__()
        lin = {"weight_quant": Int8WeightPerTensorFloat, "bias": True}
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.q = qnn.QuantLinear(d, d, **lin)
        self.k = qnn.QuantLinear(d, d, **lin)
        self.v = qnn.QuantLinear(d, d, **lin)
        self.qa, self.ka, self.va = (qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat) for _ in range(3))
        self.pa = qnn.QuantIdentity(act_quant=Uint8ActPerTensorFloat)
        self.o = qnn.QuantLinear(d, d, **lin)
        self.oa = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat)
        self.head = qnn.QuantLinear(d, 4, **lin)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.inp(x)
        q, k, v = self.qa(self.q(x)), self.ka(self.k(x)), self.va(self.v(x))
        p = torch.softmax(torch.matmul(q, k.transpose(-1, -2)) * 0.25, dim=-1)
        y = self.oa(self.o(torch.matmul(self.pa(p), v)))
        return self.head(y.mean(dim=1))


def _randomize_bn(model: nn.Module, gen: torch.Generator, binary: bool = False) -> None:
    """Give every BatchNorm non-trivial statistics and affine parameters (a fresh BN is the identity)."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            c = m.num_features
            with torch.no_grad():
                m.weight.copy_(0.5 + torch.rand(c, generator=gen))
                m.running_var.copy_(0.5 + torch.rand(c, generator=gen))
                if binary:
                    m.bias.zero_()
                    m.running_mean.copy_(0.2 * torch.randint(-3, 4, (c,), generator=gen).float())
                else:
                    m.bias.copy_(0.2 * torch.randn(c, generator=gen))
                    m.running_mean.copy_(0.2 * torch.randn(c, generator=gen))


def _calibrate(model: nn.Module, shape: tuple[int, ...], gen: torch.Generator, steps: int = 8) -> None:
    """Collect activation-scale statistics on random data (Brevitas calibration mode)."""
    model.eval()
    with torch.no_grad(), calibration_mode(model):
        for _ in range(steps):
            model(torch.randn((16, *shape), generator=gen))


def TfcW1A1() -> nn.Module:  # noqa: N802 (named like the model classes above)
    """FINN's TFC-w1a1 topology from brevitas_examples.bnn_pynq (untrained, its own initialization): 1x28x28 ->
    2x - 1 -> BipolarQuant -> three Linear(784|64 -> 64, 1-bit weights) + BatchNorm1d + BipolarQuant ->
    Linear(64 -> 10, 1-bit weights) -> TensorNorm."""
    from brevitas_examples.bnn_pynq.models import tfc_1w1a

    return tfc_1w1a(pretrained=False)


def TfcW1A2() -> nn.Module:  # noqa: N802
    """FINN's TFC-w1a2 topology from brevitas_examples.bnn_pynq (untrained): TfcW1A1 with 2-bit signed narrow
    activations (ternary: -1, 0, 1 times the scale; QONNX Quant) instead of BipolarQuant."""
    from brevitas_examples.bnn_pynq.models import tfc_1w2a

    return tfc_1w2a(pretrained=False)


SPECS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], bool]] = {
    # name: (constructor, per-sample input shape, binary BN statistics)
    "cnn_w4a4": (CnnW4A4, (3, 32, 32), False),
    "fp8_mlp": (Fp8Mlp, (64,), False),
    "binary_mlp": (BinaryMlp, (63,), True),
    "int8_resblock": (Int8ResBlock, (3, 16, 16), False),
    # integer mode (issue 10): the benchmark CNN, a ResNet-style network, 2- to 8-bit mixed layers
    "cnn4c2f_w4a4": (Cnn4c2f, (3, 32, 32), False),
    "resnet_mini_w6a6": (ResNetMini, (3, 32, 32), False),
    "mixed_bits": (MixedBits, (3, 16, 16), False),
    # binary weights: FINN's TFC-w1a1 and TFC-w1a2 (integer mode's XNOR-popcount and bit-serial paths)
    "tfc_w1a1": (TfcW1A1, (1, 28, 28), False),
    "tfc_w1a2": (TfcW1A2, (1, 28, 28), False),
    # a transformer block: products of two quantized activations (integer mode's activation MatMul)
    "attn_w8a8": (AttnW8A8, (8, 16), False),
}


# ---------------------------------------------------------------------------------------------------------------
# models/as_exported/: the files as export_qonnx writes them (no cleanup), with layer kinds the models above lack


class Conv1dW4A4(nn.Module):
    """4x32 -> 5: QuantConv1d(4 -> 16, k3, pad 1) + BatchNorm1d + 4-bit ReLU, a grouped strided QuantConv1d (16 ->
    16, k5, stride 2, groups 2, bias) + 3-bit ReLU, a 6-bit Linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.c1 = qnn.QuantConv1d(4, 16, 3, padding=1, weight_bit_width=4, bias=False)
        self.bn1 = nn.BatchNorm1d(16)
        self.r1 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.c2 = qnn.QuantConv1d(16, 16, 5, stride=2, groups=2, weight_bit_width=4, bias=True)
        self.r2 = qnn.QuantReLU(bit_width=3, return_quant_tensor=True)
        self.fc = qnn.QuantLinear(16 * 14, 5, weight_bit_width=6, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.r1(self.bn1(self.c1(self.inp(x))))
        x = self.r2(self.c2(x))
        return self.fc(torch.flatten(x, 1))


class ConvTransposeW4A4(nn.Module):
    """3x8x8 -> 2x16x16: QuantConv2d + 4-bit ReLU, QuantConvTranspose2d (k2, stride 2, bias) + 4-bit ReLU, an 8-bit
    1x1 QuantConv2d with bias (float output)."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.c1 = qnn.QuantConv2d(3, 8, 3, padding=1, weight_bit_width=4, bias=True)
        self.r1 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.up = qnn.QuantConvTranspose2d(8, 8, 2, stride=2, weight_bit_width=4, bias=True)
        self.r2 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.c3 = qnn.QuantConv2d(8, 2, 1, weight_bit_width=8, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c3(self.r2(self.up(self.r1(self.c1(self.inp(x))))))


class DepthwiseHardTanhW4A4(nn.Module):
    """8x8x8 -> 4: a depthwise QuantConv2d (groups 8) + BatchNorm + 4-bit signed QuantHardTanh(-1, 1), a pointwise
    QuantConv2d + 4-bit ReLU, MaxPool(2), a 4-bit Linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.dw = qnn.QuantConv2d(8, 8, 3, padding=1, groups=8, weight_bit_width=4, bias=False)
        self.bn = nn.BatchNorm2d(8)
        self.ht = qnn.QuantHardTanh(bit_width=4, max_val=1.0, min_val=-1.0, return_quant_tensor=True)
        self.pw = qnn.QuantConv2d(8, 16, 1, weight_bit_width=4, bias=False)
        self.r = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.pool = nn.MaxPool2d(2)
        self.fc = qnn.QuantLinear(16 * 4 * 4, 4, weight_bit_width=4, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.ht(self.bn(self.dw(self.inp(x))))
        x = self.pool(self.r(self.pw(x)))
        return self.fc(torch.flatten(x, 1))


class Int32BiasMlpW8A8(nn.Module):
    """20 -> 3: three 8-bit Linear layers whose biases are quantized too (Int32Bias, Int16Bias: the bias scale is
    the input scale times the weight scale, computed in the graph), 8- and 4-bit ReLUs between them."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.l1 = qnn.QuantLinear(20, 32, weight_bit_width=8, bias=True, bias_quant=Int32Bias)
        self.r1 = qnn.QuantReLU(bit_width=8, return_quant_tensor=True)
        self.l2 = qnn.QuantLinear(32, 16, weight_bit_width=8, bias=True, bias_quant=Int16Bias)
        self.r2 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.l3 = qnn.QuantLinear(16, 3, weight_bit_width=8, bias=True, bias_quant=Int32Bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l3(self.r2(self.l2(self.r1(self.l1(self.inp(x))))))


class FixedPointCnnW8A8(nn.Module):
    """3x12x12 -> 10 with power-of-two scales throughout (Brevitas' FixedPoint quantizers, as FINN users set them):
    two 3x3 QuantConv2d + 8-bit unsigned ReLU, TruncAdaptiveAvgPool2d to 1x1, an 8-bit Linear head."""

    def __init__(self) -> None:
        super().__init__()
        w8 = {"weight_quant": Int8WeightPerTensorFixedPoint, "bias": False}
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFixedPoint, return_quant_tensor=True)
        self.c1 = qnn.QuantConv2d(3, 16, 3, **w8)
        self.r1 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFixedPoint, return_quant_tensor=True)
        self.c2 = qnn.QuantConv2d(16, 16, 3, **w8)
        self.r2 = qnn.QuantReLU(act_quant=Uint8ActPerTensorFixedPoint, return_quant_tensor=True)
        self.gap = qnn.TruncAdaptiveAvgPool2d(output_size=1, return_quant_tensor=True)
        self.fc = qnn.QuantLinear(16, 10, **w8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gap(self.r2(self.c2(self.r1(self.c1(self.inp(x))))))
        return self.fc(torch.flatten(x, 1))


class ResidualConcatW6A6(nn.Module):
    """3x8x8 -> 4x4x4: a 6-bit conv block a, a second conv quantized to 6 bits signed, QuantEltwiseAdd(a, b) + 6-bit
    ReLU, the concatenation of that sum with a along the channels (two grids of different scales), a strided
    QuantConv2d with bias on it (float output)."""

    def __init__(self) -> None:
        super().__init__()
        w6 = {"weight_bit_width": 6}
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.c1 = qnn.QuantConv2d(3, 8, 3, padding=1, bias=False, **w6)
        self.r1 = qnn.QuantReLU(bit_width=6, return_quant_tensor=True)
        self.c2 = qnn.QuantConv2d(8, 8, 3, padding=1, bias=False, **w6)
        self.q2 = qnn.QuantIdentity(bit_width=6, return_quant_tensor=True)
        self.add = qnn.QuantEltwiseAdd(return_quant_tensor=True)
        self.r2 = qnn.QuantReLU(bit_width=6, return_quant_tensor=True)
        self.c3 = qnn.QuantConv2d(16, 4, 3, stride=2, padding=1, bias=True, **w6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.r1(self.c1(self.inp(x)))
        y = self.r2(self.add(a, self.q2(self.c2(a))))
        # QuantTensors when exported; plain tensors in calibration mode
        return self.c3(torch.cat([getattr(y, "value", y), getattr(a, "value", a)], dim=1))


class AvgPoolHeadW4A4(nn.Module):
    """3x8x8 -> 3 with float average pools as users write them: QuantConv2d + 4-bit ReLU, nn.AvgPool2d(2) then a
    4-bit unsigned QuantIdentity, QuantConv2d + 4-bit ReLU, nn.AdaptiveAvgPool2d(1) (torch's dynamo exporter writes
    ReduceMean over the spatial axes), flatten and a 4-bit Linear head reading the mean directly."""

    def __init__(self) -> None:
        super().__init__()
        w4 = {"weight_bit_width": 4, "bias": False}
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.c1 = qnn.QuantConv2d(3, 8, 3, padding=1, **w4)
        self.r1 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.pool = nn.AvgPool2d(2)
        self.q = qnn.QuantIdentity(act_quant=Uint8ActPerTensorFloat, bit_width=4, return_quant_tensor=True)
        self.c2 = qnn.QuantConv2d(8, 8, 3, padding=1, **w4)
        self.r2 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.fc = qnn.QuantLinear(8, 3, weight_bit_width=4, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.r1(self.c1(self.inp(x)))
        y = self.r2(self.c2(self.q(self.pool(getattr(y, "value", y)))))
        return self.fc(torch.flatten(self.gap(getattr(y, "value", y)), 1))


class DepthwisePerChannelW4A4(nn.Module):
    """3x8x8 -> 4x8x8, the block of Brevitas' quant_mobilenet_v1 (and FINN's MobileNet-v1): a QuantConv2d + BN and a
    4-bit ReLU whose scale is per channel (``scaling_per_output_channel``), read by a depthwise QuantConv2d (groups
    8) + BN + 4-bit ReLU, then a 1x1 QuantConv2d."""

    def __init__(self) -> None:
        super().__init__()
        w4 = {"weight_bit_width": 4, "bias": False}
        self.inp = qnn.QuantIdentity(act_quant=Int8ActPerTensorFloat, return_quant_tensor=True)
        self.pw1 = qnn.QuantConv2d(3, 8, 1, **w4)
        self.bn1 = nn.BatchNorm2d(8)
        per_channel = {"scaling_per_output_channel": True, "per_channel_broadcastable_shape": (1, 8, 1, 1),
                       "scaling_stats_permute_dims": (1, 0, 2, 3)}  # fmt: skip
        self.r1 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True, **per_channel)
        self.dw = qnn.QuantConv2d(8, 8, 3, padding=1, groups=8, **w4)
        self.bn2 = nn.BatchNorm2d(8)
        self.r2 = qnn.QuantReLU(bit_width=4, return_quant_tensor=True)
        self.pw2 = qnn.QuantConv2d(8, 4, 1, **w4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.r1(self.bn1(self.pw1(self.inp(x))))
        return self.pw2(self.r2(self.bn2(self.dw(y))))


# name: (constructor, per-sample input shape, binary BN statistics, torch's dynamo exporter or else TorchScript);
# written to models/as_exported/ without qonnx's cleanup
AS_EXPORTED: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...], bool, bool]] = {
    "conv1d_w4a4": (Conv1dW4A4, (4, 32), False, True),
    "convtranspose_w4a4": (ConvTransposeW4A4, (3, 8, 8), False, True),
    "depthwise_hardtanh_w4a4": (DepthwiseHardTanhW4A4, (8, 8, 8), False, True),
    "int32_bias_mlp_w8a8": (Int32BiasMlpW8A8, (20,), False, True),
    "fixed_point_cnn_w8a8": (FixedPointCnnW8A8, (3, 12, 12), False, True),
    "residual_concat_w6a6": (ResidualConcatW6A6, (3, 8, 8), False, True),
    "avgpool_head_w4a4": (AvgPoolHeadW4A4, (3, 8, 8), False, True),
    "depthwise_perchannel_w4a4": (DepthwisePerChannelW4A4, (3, 8, 8), False, True),
    # FINN's TFC-w1a1 through the TorchScript exporter (export_qonnx(..., dynamo=False), opset 13, batch 1), the
    # form of FINN's tutorials: Linear layers become Transpose + MatMul, each followed by BatchNormalization
    "tfc_w1a1_torchscript": (TfcW1A1, (1, 28, 28), True, False),
}


def _strip_metadata(proto: onnx.ModelProto) -> None:
    """Drop the exporter's metadata (stack traces with local paths, torch.export bookkeeping) and doc strings."""
    del proto.metadata_props[:]
    graph = proto.graph
    del graph.metadata_props[:]
    for item in [*graph.node, *graph.input, *graph.output, *graph.value_info, *graph.initializer]:
        del item.metadata_props[:]
        item.ClearField("doc_string")


def _export_raw(
    ctor: Callable[[], nn.Module], shape: tuple[int, ...], binary: bool, seed: int, dynamo: bool = True
) -> onnx.ModelProto:
    """Build, calibrate and export one model with export_qonnx (torch's dynamo exporter with a dynamic batch, or
    its TorchScript exporter at opset 13 with batch 1); the file as written, loaded."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = ctor()
    _randomize_bn(model, gen, binary=binary)
    _calibrate(model, shape, gen)
    model.eval()
    example = torch.randn((2, *shape), generator=gen)
    batch = torch.export.Dim("batch", min=1, max=1024)
    with tempfile.TemporaryDirectory() as tmp:  # the exporter may also write external data next to the file
        raw = str(Path(tmp) / "model.onnx")
        if dynamo:
            export_qonnx(model, example, export_path=raw, dynamic_shapes={"x": {0: batch}})
        else:
            export_qonnx(model, example[:1], export_path=raw, dynamo=False, opset_version=13)
        return onnx.load(raw)


def export(name: str, seed: int) -> onnx.ModelProto:
    """Build, calibrate and export one model; return the cleaned QONNX model (dynamic batch, IR 10)."""
    ctor, shape, binary = SPECS[name]
    wrapped = cleanup(ModelWrapper(_export_raw(ctor, shape, binary, seed)))
    proto = wrapped.model
    proto.ir_version = IR_VERSION
    proto.producer_name = "ortquant models/make_models.py"
    proto.producer_version = f"brevitas {brevitas.__version__}, torch {torch.__version__}, qonnx {QONNX_VERSION}"
    _strip_metadata(proto)
    onnx.checker.check_model(proto)  # structural check (custom-op schemas are not registered here)
    return proto


def cleanup(wrapped: ModelWrapper) -> ModelWrapper:
    """qonnx's cleanup_model transformations in its order, preserving every quantizer on constants (PRESERVE)."""
    for t in (
        InferShapes(),
        GiveUniqueParameterTensors(),
        FoldConstants(exclude_op_types=PRESERVE),
        FoldTransposeIntoQuantInit(),
        RemoveUnusedTensors(),
        RemoveStaticGraphInputs(),
        GiveUniqueNodeNames(),
        GiveReadableTensorNames(),
    ):
        wrapped = wrapped.transform(t)
    return wrapped


def qonnx_reference(proto: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    """Run qonnx's execute_onnx on a copy of the model with the batch dimension fixed to x's."""
    wrapped = ModelWrapper(proto.SerializeToString())
    wrapped = wrapped.transform(ChangeBatchSize(int(x.shape[0]))).transform(InferShapes())
    iname = wrapped.graph.input[0].name
    oname = wrapped.graph.output[0].name
    return np.asarray(execute_onnx(wrapped, {iname: x})[oname])


def make(name: str, seed: int) -> None:
    """Export one model and store it with its inputs and qonnx outputs."""
    proto = export(name, seed)
    onnx.save(proto, str(HERE / f"{name}.onnx"))
    shape = SPECS[name][1]
    rng = np.random.default_rng(seed)
    arrays: dict[str, np.ndarray] = {}
    for b in BATCHES:
        x = rng.standard_normal((b, *shape)).astype(np.float32)
        arrays[f"input_b{b}"] = x
        arrays[f"output_b{b}"] = qonnx_reference(proto, x)
    np.savez_compressed(HERE / f"{name}.npz", **arrays)
    ops = sorted({(n.domain or "ai.onnx", n.op_type) for n in proto.graph.node})
    size = (HERE / f"{name}.onnx").stat().st_size
    print(f"{name}: {size} bytes, ops {ops}, output_b1 {arrays['output_b1'].ravel()[:4]}")


def make_as_exported(name: str, seed: int) -> None:
    """Export one AS_EXPORTED model and store the file as export_qonnx wrote it (only its metadata and doc strings,
    which hold local paths, dropped) in models/as_exported/, with one input batch (4 samples; 1 for a fixed batch)
    and the output of qonnx on the model's cleaned copy (qonnx's executor wants the cleanup; it does not change what
    the graph computes). The npz keys are those of the real-world corpus (``in:<input>``, ``out:<output>``), so its
    test worker reads both."""
    ctor, shape, binary, dynamo = AS_EXPORTED[name]
    proto = _export_raw(ctor, shape, binary, seed, dynamo)
    _strip_metadata(proto)  # the exporter's own IR version stays (10 from dynamo, 7 from TorchScript)
    folder = HERE / "as_exported"
    folder.mkdir(exist_ok=True)
    onnx.save(proto, str(folder / f"{name}.onnx"))
    cleaned = cleanup(ModelWrapper(proto.SerializeToString())).model
    cleaned.ir_version = IR_VERSION
    fixed = not proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param
    x = np.random.default_rng(seed).standard_normal((1 if fixed else 4, *shape)).astype(np.float32)
    y = qonnx_reference(cleaned, x)
    np.savez_compressed(
        folder / f"{name}.npz", **{f"in:{proto.graph.input[0].name}": x, f"out:{proto.graph.output[0].name}": y}
    )
    ops = sorted({(n.domain or "ai.onnx", n.op_type) for n in proto.graph.node})
    size = (folder / f"{name}.onnx").stat().st_size
    print(f"as_exported/{name}: {size} bytes, ops {ops}, output {y.ravel()[:4]}")


def main(argv: list[str]) -> None:
    """Make the models named on the command line (all when none)."""
    print(
        f"torch {torch.__version__}, brevitas {brevitas.__version__}, qonnx {QONNX_VERSION}, "
        f"onnx {onnx.__version__}, onnxruntime {onnxruntime.__version__}"
    )
    names = argv or [*SPECS, *AS_EXPORTED]
    for i, name in enumerate(SPECS):
        if name in names:
            make(name, seed=1000 + i)
    for i, name in enumerate(AS_EXPORTED):
        if name in names:
            make_as_exported(name, seed=2000 + i)


if __name__ == "__main__":
    main(sys.argv[1:])
