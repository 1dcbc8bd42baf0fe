"""ortquant.ray on a real local Ray cluster started here (3 logical CPUs, 2 Predictor workers): a few thousand
samples of models/cnn_w4a4.onnx through ``ds.map_batches(ortquant.ray.Predictor, ...)``, every output equal, bit
for bit and in order, to one single-process session's; pass-through columns; the CPUs Ray gives a worker become its
intra-op threads; a failing batch fails the job with the batch and the node named, without hanging.

Needs ``ray[data]``, which is not in the development venv: ``make test-ray`` (part of ``make test-serving``) creates
a venv of its own and runs this file there; elsewhere the module is skipped.

Floating-point note: onnxruntime's float Gemm/Conv (MLAS) may round differently for a batch of one row than for
larger batches, so the single-process result is computed in batches of the same size, every Ray batch here has
exactly BATCH rows (blocks of BATCH rows), and test_reference_is_batch_invariant checks that batches of two or more
rows agree with each other.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

import numpy as np
import pytest


def _require(name: str, reason: str):
    """importorskip, except under ``make test-serving`` (ORTQUANT_REQUIRE_SERVING=1), where a missing package fails."""
    if os.environ.get("ORTQUANT_REQUIRE_SERVING") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=reason)


ray = _require("ray", reason="ray is not installed (make test-serving installs ray[data] in its own venv)")
_require("ray.data", reason="ray[data] is not installed")

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import ortquant  # noqa: E402
import ortquant.ray  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "cnn_w4a4.onnx"
N = 3072
BATCH = 64


def _row(i: int) -> np.ndarray:
    return np.random.default_rng(1000 + i).standard_normal((3, 32, 32)).astype(np.float32)


def _make_inputs(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    ids = batch["id"]
    return {
        "id": ids,
        "global_in": np.stack([_row(int(i)) for i in ids]),
        "tag": np.array([f"sample-{int(i)}" for i in ids], dtype=object),
    }


def _single_process(chunk: int) -> np.ndarray:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ortquant.InferenceSession(MODEL, sess_options=so)
    x = np.stack([_row(i) for i in range(N)])
    return np.concatenate([sess.run(None, {"global_in": x[k : k + chunk]})[0] for k in range(0, N, chunk)])


@pytest.fixture(scope="module")
def cluster():
    # Workers inherit this environment (PYTHONPATH with ortquant, ORTQUANT_LIBRARY if set); they also need this
    # directory to unpickle the helpers defined here.
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])
    # 3 logical CPUs: 2 for the two Predictor workers and 1 for the tasks that make the input blocks (with only 2,
    # the two actors hold both CPUs and the read tasks that feed them never get scheduled: the job hangs).
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ctx = ray.data.DataContext.get_current()
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    return _single_process(BATCH)


def _dataset():
    return ray.data.range(N, override_num_blocks=N // BATCH).map_batches(_make_inputs, batch_size=BATCH)


def test_reference_is_batch_invariant(reference):
    np.testing.assert_array_equal(_single_process(40), reference)  # 3072 = 76 * 40 + 32: no batch of 1 row


class _Probe(ortquant.ray.Predictor):
    """Adds the worker's pid and thread count to every row (to see where rows ran)."""

    def __call__(self, batch):
        out = super().__call__(batch)
        n = len(out["global_out"])
        out["pid"] = np.full(n, os.getpid())
        out["threads"] = np.full(n, self.threads)
        out["batch_rows"] = np.full(n, n)
        return out


def test_two_workers_match_the_single_process_result_in_order(cluster, reference):
    t0 = time.perf_counter()
    # The input blocks are made first, so that all of them are waiting when the two workers start: Ray gives each
    # block to the least busy worker, so the first two go to different workers. Streamed from one input task
    # instead, a block could arrive only after the previous one was done, and with a model faster than the input
    # task one worker took every block (both idle at each arrival: the tie goes to the same worker).
    out = (
        _dataset()
        .materialize()
        .map_batches(
            _Probe,
            fn_constructor_kwargs={"model": str(MODEL)},
            concurrency=2,
            batch_size=BATCH,
            num_cpus=1,
            batch_format="numpy",
        )
    )
    rows = out.take_all()
    seconds = time.perf_counter() - t0
    assert len(rows) == N
    assert [int(r["id"]) for r in rows] == list(range(N))  # in order
    assert all(r["tag"] == f"sample-{int(r['id'])}" for r in rows)  # pass-through column untouched
    assert "global_in" not in rows[0]  # the input column was consumed
    got = np.stack([r["global_out"] for r in rows])
    assert got.dtype == np.float32 and got.shape == (N, 10)
    np.testing.assert_array_equal(got, reference)
    assert {int(r["batch_rows"]) for r in rows} == {BATCH}
    assert len({int(r["pid"]) for r in rows}) == 2  # both workers did work
    assert {int(r["threads"]) for r in rows} == {1}  # num_cpus=1 -> one intra-op thread, not one per core
    print(f"ray: {N} rows through 2 workers in {seconds:.2f} s ({N / seconds:.0f} rows/s incl. start-up)")


def test_threads_follow_num_cpus_and_predict_reports_rows_per_s(cluster, reference):
    out, fig = ortquant.ray.predict(_dataset(), str(MODEL), concurrency=1, batch_size=BATCH, num_cpus=2)
    assert fig["rows"] == N and fig["rows_per_s"] > 0 and fig["seconds"] > 0
    got = np.stack([r["global_out"] for r in out.take_all()])
    np.testing.assert_array_equal(got, reference)
    probe = _dataset().map_batches(
        _Probe, fn_constructor_kwargs={"model": str(MODEL)}, concurrency=1, batch_size=BATCH, num_cpus=2
    )
    assert {int(r["threads"]) for r in probe.take(5)} == {2}
    print(f"ortquant.ray.predict: {fig['rows']} rows, {fig['rows_per_s']:.0f} rows/s (1 worker, 2 threads)")


def _bits_model(path: Path) -> str:
    """y = Quant(x, 0.25, 0, min(bits)): a batch whose `bits` column holds a 0 fails in node 'batch_quant'."""
    nodes = [
        helper.make_node("ReduceMin", ["bits"], ["bw"], keepdims=0, name="min_bits"),
        helper.make_node(
            "Quant", ["x", "scale", "zeropt", "bw"], ["y"], domain="qonnx.custom_op.general", name="batch_quant"
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "bits",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4]),
            helper.make_tensor_value_info("bits", TensorProto.FLOAT, ["n"]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 4])],
        initializer=[
            numpy_helper.from_array(np.float32(0.25), "scale"),
            numpy_helper.from_array(np.float32(0), "zeropt"),
        ],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("qonnx.custom_op.general", 1)]
    )
    model.ir_version = 10
    onnx.save(model, path)
    return str(path)


def test_a_failing_batch_fails_the_job_naming_batch_and_node(cluster, tmp_path):
    model = _bits_model(tmp_path / "bits.onnx")

    def make(batch):
        ids = batch["id"]
        bits = np.where(ids == 700, 0, 8).astype(np.float32)  # row 700 is in the 11th batch of 64
        return {"x": np.tile(ids[:, None].astype(np.float32), (1, 4)), "bits": bits}

    ds = ray.data.range(1024, override_num_blocks=16).map_batches(make, batch_size=64)
    t0 = time.perf_counter()
    with pytest.raises(Exception) as e:  # Ray wraps the worker's BatchError in its own type
        ds.map_batches(
            ortquant.ray.Predictor, fn_constructor_kwargs={"model": model}, concurrency=2, batch_size=64
        ).materialize()
    msg = str(e.value)
    assert "BatchError" in msg and "batch_quant" in msg and "bitwidth" in msg and "of model" in msg, msg
    assert time.perf_counter() - t0 < 120  # failed, not hung
