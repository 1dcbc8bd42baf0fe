"""Runs published models of ``../shared/conformance/realworld`` as a user does, in this fresh process.

Nothing is registered or set up before the models are loaded: this file imports only numpy, onnx and the public
``ortquant`` API. Usage: ``python rw_worker.py MODE CORPUS_DIR NAME...``; prints one JSON object per model (one
line each, prefixed ``RW `` so that anything else the libraries print cannot be mistaken for a result).

Modes: ``default``, ``exact``, ``integer`` (``ortquant.InferenceSession(path, **mode)``), ``prepare`` (the CLI's
``ortquant prepare IN OUT``, then a plain ``onnxruntime.InferenceSession`` with only the library registered: the
C/C++ host path), ``check`` (the CLI's ``ortquant check`` report and exit status) and ``random`` (the default session
against qonnx run here, on 16 seeded standard-normal inputs shaped like the stored ones).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
import traceback
from typing import Any

import numpy as np


def _feeds(npz: Any) -> dict[str, np.ndarray]:
    return {k[3:]: npz[k] for k in npz.files if k.startswith("in:")}


def _compare(names: list[str], outs: list[np.ndarray], npz: Any) -> dict[str, Any]:
    got = dict(zip(names, outs, strict=True))
    res: dict[str, Any] = {"outputs": {}}
    for k in npz.files:
        if not k.startswith("out:"):
            continue
        ref = np.asarray(npz[k])
        out = got.get(k[4:])
        if out is None:
            res["outputs"][k[4:]] = {"missing": True}
            continue
        out = np.asarray(out)
        entry: dict[str, Any] = {"shape_ok": list(out.shape) == list(ref.shape), "dtype": str(out.dtype)}
        if entry["shape_ok"]:
            a = out.astype(np.float64)
            b = ref.astype(np.float64)
            same = (a == b) | (np.isnan(a) & np.isnan(b))
            entry["bitexact"] = bool(
                out.dtype == ref.dtype and same.all() and (np.signbit(a) == np.signbit(b))[~np.isnan(b)].all()
            )
            diff = np.abs(a - b)
            diff[np.isnan(a) & np.isnan(b)] = 0
            entry["max_abs"] = float(np.nanmax(diff)) if diff.size else 0.0
            entry["nan_mismatch"] = bool((np.isnan(a) != np.isnan(b)).any())
            entry["ref_max"] = float(np.nanmax(np.abs(b))) if b.size else 0.0
            entry["ref_range"] = float(np.nanmax(b) - np.nanmin(b)) if b.size else 0.0
            if b.ndim == 2 and b.shape[0] == 1 and b.shape[1] > 1:
                entry["argmax"] = [int(np.argmax(a)), int(np.argmax(b))]
        res["outputs"][k[4:]] = entry
    return res


def _local_qonnx(path: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """qonnx 1.0.0's execute_onnx on this machine (the corpus README's adjustments: IR 10 for qonnx's one-node
    sessions, shapes inferred first). Imported only after ortquant's session was made."""
    from onnx import helper

    make_model = helper.make_model
    helper.make_model = lambda g, **kw: make_model(g, **{"ir_version": 10, **kw})
    try:
        from qonnx.core.modelwrapper import ModelWrapper
        from qonnx.core.onnx_exec import execute_onnx
        from qonnx.transformation.change_batchsize import ChangeBatchSize
        from qonnx.transformation.infer_shapes import InferShapes

        mw = ModelWrapper(path)
        first = mw.graph.input[0]
        dims = first.type.tensor_type.shape.dim
        if dims and not dims[0].HasField("dim_value") and first.name in feeds:
            # a symbolic batch (Brevitas' dynamic exports): qonnx's executor wants the feed's own
            mw = mw.transform(ChangeBatchSize(int(feeds[first.name].shape[0])))
        try:
            mw = mw.transform(InferShapes())
        except Exception:
            mw = ModelWrapper(path)
        return execute_onnx(mw, feeds)
    finally:
        helper.make_model = make_model


def run_one(mode: str, corpus: str, name: str) -> dict[str, Any]:
    import onnxruntime as ort

    import ortquant
    import ortquant.cli

    path = os.path.join(corpus, name + ".onnx")
    npz = np.load(os.path.join(corpus, name + ".npz"))
    so = ort.SessionOptions()
    if mode != "exact":  # exact=True: onnxruntime's default thread count, as qonnx uses (docs/ops.md)
        so.intra_op_num_threads = 1
    so.log_severity_level = 3
    if mode in ("default", "exact", "integer"):
        kw = {mode: True} if mode != "default" else {}
        sess = ortquant.InferenceSession(path, so, **kw)
    elif mode == "prepare":
        with tempfile.TemporaryDirectory() as tmp:
            out_path = os.path.join(tmp, "out.onnx")
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                rc = ortquant.cli.main(["prepare", path, out_path])
            if rc not in (0, None):
                return {"error": f"ortquant prepare exited {rc}: {buf.getvalue()[-400:]}"}
            plain = ort.SessionOptions()
            plain.intra_op_num_threads = 1
            plain.log_severity_level = 3
            plain.register_custom_ops_library(ortquant.library_path())
            sess = ort.InferenceSession(out_path, plain, providers=["CPUExecutionProvider"])
    elif mode == "random":
        return _random_inputs_vs_qonnx(path, npz, so)
    elif mode == "check":
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
            try:
                rc = ortquant.cli.main(["check", path])
            except SystemExit as e:  # argparse-style exits
                rc = e.code
        text = buf.getvalue()
        return {"rc": rc, "traceback": "Traceback (most recent call last)" in text, "report": text[-2000:]}
    else:
        raise SystemExit(f"unknown mode {mode}")
    outs = sess.run(None, _feeds(npz))
    names = [o.name for o in sess.get_outputs()]
    res = _compare(names, outs, npz)
    if mode == "exact" and not all(e.get("bitexact") for e in res["outputs"].values()):
        # The stored reference was made on another CPU; onnxruntime's float kernels (MLAS) are ISA-specific, so
        # qonnx's bits are machine-specific: compare with qonnx run here too.
        try:
            local = _local_qonnx(path, _feeds(npz))
            ref = {"out:" + k: np.asarray(local[k]).astype(np.float32) for k in names}
            res["local"] = _compare(names, outs, _Npz(ref))
        except Exception as e:
            res["local_error"] = f"{type(e).__name__}: {e}"[:500]
    return res


def _random_inputs_vs_qonnx(path: str, npz: Any, so: Any, samples: int = 16) -> dict[str, Any]:
    """The default session against qonnx run here on `samples` seeded standard-normal inputs shaped like the stored
    ones (for float-input models only): the worst output entry over the samples, and how many samples differ."""
    import ortquant

    sess = ortquant.InferenceSession(path, so)
    names = [o.name for o in sess.get_outputs()]
    stored = _feeds(npz)
    rng = np.random.default_rng(0)
    worst: dict[str, Any] = {}
    differing = 0
    for _ in range(samples):
        feeds = {k: rng.standard_normal(v.shape).astype(v.dtype) for k, v in stored.items()}
        local = _local_qonnx(path, feeds)
        ref = _Npz({"out:" + k: np.asarray(local[k]).astype(np.float32) for k in names})
        res = _compare(names, sess.run(None, feeds), ref)
        differing += any(not e.get("bitexact") for e in res["outputs"].values())
        for k, e in res["outputs"].items():
            if k not in worst or e.get("max_abs", np.inf) > worst[k].get("max_abs", np.inf) or not e["shape_ok"]:
                worst[k] = e
    return {"outputs": worst, "samples": samples, "differing": differing}


class _Npz:
    def __init__(self, d: dict[str, np.ndarray]) -> None:
        self._d = d
        self.files = list(d)

    def __getitem__(self, k: str) -> np.ndarray:
        return self._d[k]


def main(argv: list[str]) -> int:
    mode, corpus, names = argv[0], argv[1], argv[2:]
    for name in names:
        try:
            res = run_one(mode, corpus, name)
        except Exception as e:
            res = {"error": f"{type(e).__name__}: {e}"[:1500], "trace": traceback.format_exc()[-1500:]}
        res["name"] = name
        res["mode"] = mode
        print("RW " + json.dumps(res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
