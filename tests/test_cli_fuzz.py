"""A fixed-seed corpus of mutated bundled models through the ``ortquant`` command: every run ends in status 0, 1
(check's report) or 2 (one error line), never in an internal error (status 3) or a traceback.

Mutations: cut-off and bit-flipped files, attributes of another type or value, missing or dangling inputs, other op
types and domains, dropped or cut initializers, odd IR and opset versions. (The native kernels have their own fuzzer;
tests/fuzz/ covers the Python transforms through the public API.)
"""

from __future__ import annotations

import contextlib
import io
import random
from pathlib import Path

import onnx
import pytest
from onnx import AttributeProto, helper

from ortquant.cli import main

MODELS = sorted((Path(__file__).resolve().parents[1] / "models").glob("*.onnx"))
SEED = 20261125
CASES = 30


def _mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    if rng.random() < 0.5:
        return bytes(out[: rng.randrange(len(out))])
    for _ in range(rng.randint(1, 8)):
        out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def _mutate_graph(rng: random.Random, model: onnx.ModelProto) -> str:
    g = model.graph
    node = rng.choice(g.node)
    kind = rng.choice(["attr", "attr", "input", "op", "domain", "init", "ir", "opset"])
    if kind == "attr" and node.attribute:
        old = rng.choice(node.attribute)
        node.attribute.remove(old)
        new = rng.choice(
            [
                helper.make_attribute(old.name, "BANANA"),
                AttributeProto(name=old.name, type=AttributeProto.INTS),
                helper.make_attribute(old.name, rng.choice([0, -1, 65, 2**40])),
                helper.make_attribute(old.name, float("nan")),
                helper.make_attribute(old.name, [2.0, 3.0]),
            ]
        )
        node.attribute.append(new)
    elif kind == "input" and node.input:
        i = rng.randrange(len(node.input))
        if rng.random() < 0.5:
            del node.input[i]
        else:
            node.input[i] = rng.choice(["", "dangling"])
    elif kind == "op":
        node.op_type = rng.choice(["Quant", "Trunc", "BipolarQuant", "MultiThreshold", "Conv", "Gemm", "Nope"])
    elif kind == "domain":
        node.domain = rng.choice(["", "qonnx.custom_op.general", "thinker", "ortquant.integer", "x.y"])
    elif kind == "init" and g.initializer:
        t = rng.choice(g.initializer)
        if t.raw_data and rng.random() < 0.5:
            t.raw_data = t.raw_data[: len(t.raw_data) // 2]
        else:
            g.initializer.remove(t)
    elif kind == "ir":
        model.ir_version = rng.choice([0, 3, 99])
    elif kind == "opset":
        rng.choice(model.opset_import).version = rng.choice([1, 7, 99])
    return kind


def _cases() -> list[tuple[int, str, str, list[str]]]:
    rng = random.Random(SEED)
    commands = [["check"], ["check", "--integer"], ["check", "--json"], ["prepare"], ["prepare", "--integer"]]
    commands += [["run", "--random"], ["run", "--random", "--integer"]]
    return [
        (i, rng.choice(MODELS).name, rng.choice(["bytes", "graph", "graph"]), rng.choice(commands))
        for i in range(CASES)
    ]


@pytest.mark.parametrize(("case", "source", "how", "command"), _cases())
def test_mutated_model_never_ends_in_an_internal_error(case, source, how, command, tmp_path):
    rng = random.Random(SEED * 1000 + case)
    path = tmp_path / "mutated.onnx"
    data = (MODELS[0].parent / source).read_bytes()
    if how == "bytes":
        path.write_bytes(_mutate_bytes(rng, data))
        what = "bytes"
    else:
        model = onnx.load_from_string(data)
        what = ", ".join(_mutate_graph(rng, model) for _ in range(rng.randint(1, 2)))
        path.write_bytes(model.SerializeToString())
    argv = [command[0], *command[1:], str(path)]
    if command[0] == "prepare":
        argv.append(str(tmp_path / "out.onnx"))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(argv)
    label = f"{source} mutated ({what}), ortquant {' '.join(command)}"
    assert status in (0, 1, 2), (label, status, err.getvalue())
    assert "Traceback" not in err.getvalue() and "internal error" not in err.getvalue(), (label, err.getvalue())
    if status == 2:
        lines = [ln for ln in err.getvalue().splitlines() if ln.startswith(f"ortquant {command[0]}: error: ")]
        assert len(lines) == 1, (label, err.getvalue())
