"""Integer-mode coverage: how many Conv / ConvTranspose / MatMul / Gemm layers ``lower_integer`` puts on the integer
path, of all layers and of those whose two operands are on integer grids (``transforms/grid.py``), and why the
others stay float.

    PYTHONPATH=python .venv/bin/python bench/count_lowered.py [MODEL.onnx ...] [--all]

Default models: the public corpus ``../shared/conformance/realworld/*.onnx``. Each model goes through the prepare
pipeline up to ``lower_integer`` (as ``prepare_model(m, integer=True)`` does), then ``integer_plan`` and
``layer_grids`` read the same graph. Prints the models with a layer left on the float path (``--all``: every
model), the totals, and the skip reasons with their counts.
"""

from __future__ import annotations

import argparse
import collections
import sys
import warnings
from pathlib import Path

import onnx

from ortquant._session import load_model
from ortquant.transforms import PIPELINE, PrepareOptions
from ortquant.transforms.grid import infer_grids, layer_grids
from ortquant.transforms.lower_integer import LayerDecision, integer_plan

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "conformance" / "realworld"


def prepared_for_lowering(path: str) -> onnx.ModelProto:
    """The model as ``lower_integer`` sees it in ``prepare_model(m, integer=True)``: the steps before it applied."""
    model = load_model(path)
    opts = PrepareOptions(integer=True)
    for step in PIPELINE:
        if step.name == "lower_integer":
            break
        if step.when(opts):
            model = step.fn(model)
    return model


def count(path: str) -> tuple[list[LayerDecision], set[str]]:
    """The plan of every layer of the model and the names of the layers with both operands on grids."""
    model = prepared_for_lowering(path)
    plan = integer_plan(model)
    on_grids = {lg.name for lg in layer_grids(model, infer_grids(model)) if lg.on_grids}
    return plan, on_grids


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="ONNX files (default: the public corpus)")
    ap.add_argument("--all", action="store_true", help="print every model, not only those with a float layer")
    args = ap.parse_args(argv)
    paths = args.models or sorted(str(p) for p in CORPUS.glob("*.onnx"))
    if not paths:
        print(f"no models (the corpus is not at {CORPUS})", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore")  # "no layer was lowered" and onnx's warnings: the counts say it
    layers = lowered = grid_layers = grid_lowered = 0
    reasons: collections.Counter[str] = collections.Counter()
    for path in paths:
        try:
            plan, on_grids = count(path)
        except Exception as e:  # a model the pipeline refuses: named, and the count goes on
            print(f"ERROR {Path(path).name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
            continue
        n_int = sum(d.integer for d in plan)
        layers += len(plan)
        lowered += n_int
        grid_layers += sum(d.node in on_grids for d in plan)
        grid_lowered += sum(d.integer and d.node in on_grids for d in plan)
        reasons.update(d.reason for d in plan if not d.integer)
        if args.all or n_int < len(plan):
            print(f"{Path(path).name:48s} {n_int:3d} of {len(plan):3d} lowered")
    print(f"\n{len(paths)} models: {lowered} of {layers} Conv/MatMul/Gemm layers lowered; "
          f"{grid_lowered} of the {grid_layers} with both operands on integer grids")  # fmt: skip
    if reasons:
        print("\nfloat-path reasons:")
        for reason, n in reasons.most_common():
            print(f"{n:5d}  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
