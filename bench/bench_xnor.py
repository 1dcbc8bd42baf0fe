"""Binary-weight networks in integer mode: the bit kernels (XNOR-popcount, bit-serial) against the int8 engine, the
pure-float network and ortquant's default mode, one intra-op thread, batch 1 and 32, all variants interleaved in
one run.

The networks are FINN's TFC and CNV topologies, built here with onnx.helper in QONNX form (random weights; speed
does not depend on their values), each with 1-bit (w1a1: XNOR-popcount) and 2-bit ternary (w1a2: 2-bit signed
narrow Quant; bit-serial) activations:

- ``tfc-w1a1``: 784 -> 64 -> 64 -> 64 -> 10, BipolarQuant input, every layer BipolarQuant weights, BatchNorm +
  BipolarQuant between the layers (FINN's TFC-w1a1);
- ``cnv-w1a1``: 3x32x32, 8-bit input quantizer, six 3x3 convolutions (64, 64, 128, 128, 256, 256 channels, no
  padding, MaxPool 2 after the second and fourth) and three FC layers (256 -> 512 -> 512 -> 10), BipolarQuant
  weights, BatchNorm + BipolarQuant activations (FINN's CNV-w1a1). The first convolution reads the 8-bit input, so
  it runs on the int8 engine in both integer variants;
- ``tfc-w1a2``, ``cnv-w1a2``: the same with the ternary activation quantizer instead of BipolarQuant.

Variants: ``bits`` (``integer=True``), ``int8`` (the same prepared graph with the QConv/QGemm ``xnor`` attribute
set to 0: the int8 engine), ``float`` (the network with its quantizers deleted, stock onnxruntime), ``default``
(``ortquant.InferenceSession(model)``). Prints median ms and the ratios. ``--quick`` runs fewer iterations.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as bench_integer.py

import numpy as np
import onnx
import onnxruntime as ort
from bench_integer import _options, interleaved, pure_float
from onnx import TensorProto, helper, numpy_helper

import ortquant
import ortquant.kernels

QONNX = "qonnx.custom_op.general"


class _Net:
    """A small QONNX graph builder: weights and BatchNorm parameters as initializers, seeded."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, base: str, value: np.ndarray) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], domain: str = "", **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out + "_node", domain=domain, **attrs))
        return out

    def bipolar(self, x: str, scale: float = 1.0) -> str:
        return self.node("BipolarQuant", [x, self.const("s", np.float32(scale))], domain=QONNX)

    def act(self, x: str, ternary: bool) -> str:
        """The hidden activation quantizer: BipolarQuant, or FINN's 2-bit signed narrow Quant (w1a2)."""
        if not ternary:
            return self.bipolar(x)
        qp = [self.const("s", np.float32(1.0)), self.const("z", np.float32(0)), self.const("b", np.float32(2))]
        return self.node("Quant", [x, *qp], domain=QONNX, signed=1, narrow=1, rounding_mode="ROUND")

    def bipolar_weight(self, shape: tuple[int, ...]) -> str:
        w = self.const("w", self.rng.standard_normal(shape).astype(np.float32))
        return self.bipolar(w, 0.05)

    def batchnorm(self, x: str, c: int) -> str:
        f = np.float32
        r = self.rng
        params = (("gamma", r.uniform(0.5, 1.5, c)), ("beta", r.uniform(-0.1, 0.1, c)),
                  ("mean", r.uniform(-0.2, 0.2, c)), ("var", r.uniform(0.5, 2.0, c)))  # fmt: skip
        p = [self.const(n, v.astype(f)) for n, v in params]
        return self.node("BatchNormalization", [x, *p])

    def model(self, x_shape: list[object], out: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "net", [helper.make_tensor_value_info("global_in", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits,
        )  # fmt: skip
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(QONNX, 1)])
        m.ir_version = 10
        return m


def tfc(ternary: bool = False) -> onnx.ModelProto:
    """FINN's TFC-w1a1 (or, ternary, TFC-w1a2) topology."""
    g = _Net(1)
    h = g.act("global_in", ternary)
    dims = [784, 64, 64, 64, 10]
    for i in range(4):
        h = g.node("Gemm", [h, g.bipolar_weight((dims[i + 1], dims[i]))], transB=1)
        h = g.batchnorm(h, dims[i + 1])
        if i < 3:
            h = g.act(h, ternary)
    return g.model(["N", 784], h)


def cnv(ternary: bool = False) -> onnx.ModelProto:
    """FINN's CNV-w1a1 (or, ternary, CNV-w1a2) topology."""
    g = _Net(2)
    qp = [g.const("s", np.float32(1 / 64)), g.const("z", np.float32(0)), g.const("b", np.float32(8))]
    h = g.node("Quant", ["global_in", *qp], domain=QONNX, signed=1, narrow=0, rounding_mode="ROUND")
    chans = [3, 64, 64, 128, 128, 256, 256]
    for i in range(6):
        h = g.node("Conv", [h, g.bipolar_weight((chans[i + 1], chans[i], 3, 3))], kernel_shape=[3, 3])
        h = g.batchnorm(h, chans[i + 1])
        if i in (1, 3):
            h = g.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
        h = g.act(h, ternary)
    h = g.node("Reshape", [h, g.const("shape", np.array([-1, 256], dtype=np.int64))])
    dims = [256, 512, 512, 10]
    for i in range(3):
        h = g.node("Gemm", [h, g.bipolar_weight((dims[i + 1], dims[i]))], transB=1)
        h = g.batchnorm(h, dims[i + 1])
        if i < 2:
            h = g.act(h, ternary)
    return g.model(["N", 3, 32, 32], h)


def without_xnor(prepared: onnx.ModelProto) -> onnx.ModelProto:
    """The prepared integer-mode graph with every QConv / QGemm told to stay on the int8 engine."""
    out = onnx.ModelProto()
    out.CopyFrom(prepared)
    layers = ("QConv", "QConvCodes", "QGemm", "QGemmCodes")
    for n in out.graph.node:
        if n.domain == "ortquant.integer" and n.op_type in layers:
            n.attribute.append(helper.make_attribute("xnor", 0))
        if n.domain == "ortquant.integer" and n.op_type in ("QChain", "QChainCodes"):  # each layer step's own
            steps = next(helper.get_attribute_value(a) for a in n.attribute if a.name == "steps").decode().split()
            n.attribute.extend(helper.make_attribute(f"__{k}_xnor", 0) for k, op in enumerate(steps) if op in layers)
    return out


def main(argv: list[str]) -> int:
    """Time the four variants of each network at batch 1 and 32 and print the ratios."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    print(f"ortquant {ortquant.__version__}, onnxruntime {ort.__version__}, isa {ortquant.kernels.active_isa()}, "
          "1 thread")  # fmt: skip
    print("| network | batch | bits ms | int8 ms | float ms | default ms | bits/int8 | bits/float |")
    print("|---|---|---|---|---|---|---|---|")
    nets = (("tfc-w1a1", tfc()), ("cnv-w1a1", cnv()), ("tfc-w1a2", tfc(True)), ("cnv-w1a2", cnv(True)))
    for label, model in nets:
        prepared = ortquant.prepare_model(model, integer=True)
        sess = {
            "bits": ortquant.InferenceSession(model, sess_options=_options(), integer=True),
            "int8": ortquant.InferenceSession(without_xnor(prepared), sess_options=_options()),
            "float": ort.InferenceSession(pure_float(model).SerializeToString(), _options(), ["CPUExecutionProvider"]),
            "default": ortquant.InferenceSession(model, sess_options=_options()),
        }
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
        for batch in (1, 32):
            x = np.random.default_rng(batch).standard_normal((batch, *shape)).astype(np.float32)
            outs = {k: s.run(None, {"global_in": x})[0] for k, s in sess.items()}
            np.testing.assert_array_equal(outs["bits"], outs["int8"])  # the same bits, by the contract
            fns = {k: (lambda s=s, x=x: s.run(None, {"global_in": x})) for k, s in sess.items()}
            rounds, per_round = (5, 5) if args.quick else ((30, 20) if batch == 1 else (20, 3))
            med = interleaved(fns, rounds, per_round)
            cols = [med[k] for k in ("bits", "int8", "float", "default")]
            ratios = [med["bits"] / med["int8"], med["bits"] / med["float"]]
            print(f"| {label} | {batch} | " + " | ".join(f"{v:.3f}" for v in cols) + " | "
                  + " | ".join(f"{v:.2f}" for v in ratios) + " |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
