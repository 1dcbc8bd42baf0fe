"""Batch inference on a Ray cluster with Ray Data: one ortquant session per worker.

::

    import ray, ortquant.ray
    ds = ray.data.read_parquet("s3://bucket/features/")        # columns: "global_in" (tensor), "id", ...
    out = ds.map_batches(
        ortquant.ray.Predictor,
        fn_constructor_kwargs={"model": "s3://bucket/models/cnn_w4a4.onnx", "threads": 2},
        concurrency=4,          # four workers (actors), each builds its session once
        num_cpus=2,             # CPUs Ray reserves per worker; `threads` defaults to this
        batch_size=256,
    )

Batches are dicts of numpy columns (``batch_format="numpy"``, Ray Data's default). The columns named like the
model's inputs are fed to the model; each model output comes back as one column under the output's name; every
other column passes through unchanged (the input columns too when ``keep_inputs=True``). The model's first
dimension must be the row dimension. A model exported with a fixed batch (``[1, ...]``, as most QONNX exports are)
gets a symbolic batch dimension where the graph provably allows it
(:func:`ortquant.transforms.batch_size.set_batch_size`), else each batch runs that many rows at a time; the worker
logs which.

Needs Ray Data (``pip install 'ray[data]'``, or ``pip install '.[ray]'`` in the clone). Only this module knows about
Ray; ``import ortquant`` never imports it, and
this module never imports it either: in a Ray worker, where Ray is already imported, it asks Ray for the CPUs
given to the worker, so :class:`Predictor` also works as a plain callable on dict batches without Ray.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["BatchError", "Predictor", "predict"]

log = logging.getLogger("ortquant.ray")


class BatchError(RuntimeError):
    """A batch failed: the message names the worker's batch number, its rows and the model (and, from
    onnxruntime, the failing node)."""


def _read_model(model: str | os.PathLike[str] | bytes) -> bytes | str:
    """A local path stays a path; a URI (``s3://``, ``gs://``, ``hdfs://``, ``file://`` ...) is read through
    pyarrow's filesystems (Ray Data depends on pyarrow), so every worker reads the same object itself."""
    if isinstance(model, bytes):
        return model
    text = os.fspath(model)
    if "://" not in text:
        return text
    if text.startswith("file://"):
        from urllib.parse import unquote, urlparse

        return unquote(urlparse(text).path)
    from pyarrow import fs  # only for URIs

    filesystem, path = fs.FileSystem.from_uri(text)
    with filesystem.open_input_file(path) as f:
        return f.read()


def _fixed_batch(model: Any) -> int | None:
    """The fixed leading dimension every graph input of ``model`` (a ModelProto) declares, or None."""
    inits = {t.name for t in model.graph.initializer}
    leading = set()
    for vi in model.graph.input:
        if vi.name in inits:
            continue
        dims = vi.type.tensor_type.shape.dim if vi.type.HasField("tensor_type") else []
        if not dims or not dims[0].HasField("dim_value"):
            return None
        leading.add(int(dims[0].dim_value))
    return leading.pop() if len(leading) == 1 else None


def _assigned_cpus() -> int | None:
    """The CPUs Ray reserved for this worker, or None outside a Ray worker."""
    ray = sys.modules.get("ray")  # a Ray worker has imported Ray; anywhere else there is nothing to ask
    if ray is None or not ray.is_initialized():
        return None
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    return max(1, int(cpus)) if cpus else None


class Predictor:
    """A Ray Data callable class: ``ds.map_batches(Predictor, fn_constructor_kwargs={"model": ...}, ...)``.

    Built once per worker: the model is read there (``model``: a local path every worker can read, a URI, or
    the model's bytes), prepared (:func:`ortquant.prepare_model` with ``exact`` / ``integer``) and loaded in an
    ``onnxruntime.InferenceSession`` with ortquant registered (an InferenceSession cannot be pickled, so it is
    never shipped; only these arguments are).

    ``threads``: onnxruntime's intra-op threads. Set explicitly because onnxruntime ignores ``OMP_NUM_THREADS``
    (which Ray sets to 1 in workers) and would otherwise start one thread per core of the machine in every
    worker. Default: the CPUs Ray reserved for the worker (``num_cpus`` of ``map_batches``; 1 unless given), or
    1 outside Ray. Inter-op threads are 1 and, unless ``spin=True``, idle pool threads do not spin, so workers
    sharing a node do not steal each other's cores.

    ``outputs``: output names to compute (default: all). ``keep_inputs``: also pass the input columns through.
    ``log_every_s``: log this worker's rows/s (logger ``ortquant.ray``, INFO) at most this often; the figures are
    also in :meth:`stats`.

    A batch that fails raises :class:`BatchError` naming the worker's batch number, the rows and onnxruntime's
    message (which names the node), and Ray Data fails the job with it instead of retrying forever.

    A model whose inputs fix the batch dimension (``[1, 3, 32, 32]``) is rewritten for any batch size with
    :func:`ortquant.transforms.batch_size.set_batch_size` (``batch_mode == "rebatched"``, logged at INFO); when the
    graph does not allow that, every batch runs that many rows at a time (``batch_mode == "rows"``, logged as a
    WARNING with the reason). A model with a symbolic batch runs as it is (``batch_mode == "as exported"``).
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | bytes,
        *,
        threads: int | None = None,
        exact: bool = False,
        integer: bool = False,
        outputs: Sequence[str] | None = None,
        keep_inputs: bool = False,
        spin: bool = False,
        log_every_s: float = 30.0,
    ) -> None:
        import onnxruntime as ort

        import ortquant

        self.model_name = model if isinstance(model, str) else ("<bytes>" if isinstance(model, bytes) else str(model))
        if threads is None:
            threads = _assigned_cpus() or 1
        if threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        self.threads = threads
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        if not spin:
            so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        source = _read_model(model)
        self.batch_mode = "as exported"
        self.rows_per_run: int | None = None  # with a fixed batch that cannot be made dynamic
        source = self._rebatch(source)
        self.session = ortquant.InferenceSession(source, sess_options=so, exact=exact, integer=integer)
        self.input_names = [i.name for i in self.session.get_inputs()]
        all_outputs = [o.name for o in self.session.get_outputs()]
        if outputs is not None:
            unknown = [o for o in outputs if o not in all_outputs]
            if unknown:
                raise ValueError(f"model {self.model_name} has no output(s) {unknown}; its outputs: {all_outputs}")
        self.output_names = list(outputs) if outputs is not None else all_outputs
        self.keep_inputs = keep_inputs
        self.log_every_s = log_every_s
        self._batches = 0
        self._rows = 0
        self._run_s = 0.0
        self._started = time.perf_counter()
        self._last_log = self._started

    def _rebatch(self, source: bytes | str) -> Any:
        """The model to load: ``source`` itself, or a ModelProto with a symbolic batch dimension."""
        import onnx

        from ortquant.transforms import ModelError
        from ortquant.transforms.batch_size import set_batch_size

        try:  # a quick look at the declared inputs; a broken file is reported by InferenceSession below
            if isinstance(source, bytes):
                proto = onnx.load_model_from_string(source)
            else:
                proto = onnx.load(source, load_external_data=False)
        except Exception:
            return source
        fixed = _fixed_batch(proto)
        if fixed is None:
            return source
        try:
            if not isinstance(source, bytes):
                proto = onnx.load(source)  # with its external data: the rewritten model is handed over in memory
            rebatched = set_batch_size(proto, None)
        except ModelError as e:
            self.batch_mode = "rows"
            self.rows_per_run = fixed
            log.warning(
                "ortquant.ray: model %s has a fixed batch of %d and its batch dimension cannot be made dynamic (%s); "
                "each batch runs %d row(s) at a time", self.model_name, fixed, e, fixed,
            )  # fmt: skip
            return source
        self.batch_mode = "rebatched"
        log.info(
            "ortquant.ray: model %s has a fixed batch of %d; its batch dimension was made dynamic "
            "(graph inputs, outputs and Reshape shapes), so each batch runs in one call", self.model_name, fixed,
        )  # fmt: skip
        return rebatched

    def _run(self, feeds: dict[str, np.ndarray], n: int) -> list[Any]:
        if self.rows_per_run is None or n == self.rows_per_run:
            return self.session.run(self.output_names, feeds)
        step = self.rows_per_run
        if n % step:
            raise ValueError(f"the model runs {step} rows at a time (its fixed batch), and {n} rows do not divide")
        parts = [self.session.run(self.output_names, {k: v[i : i + step] for k, v in feeds.items()})
                 for i in range(0, n, step)]  # fmt: skip
        return [np.concatenate([p[j] for p in parts]) for j in range(len(self.output_names))]

    def stats(self) -> dict[str, float]:
        """This worker's figures so far: batches, rows, seconds in onnxruntime, rows/s (of onnxruntime time)."""
        return {
            "batches": self._batches,
            "rows": self._rows,
            "run_seconds": self._run_s,
            "rows_per_s": self._rows / self._run_s if self._run_s > 0 else 0.0,
            "threads": self.threads,
        }

    def _feeds(self, batch: Mapping[str, Any]) -> tuple[dict[str, np.ndarray], int]:
        missing = [n for n in self.input_names if n not in batch]
        if missing:
            raise BatchError(
                f"batch {self._batches} of model {self.model_name}: no column(s) {missing} for the model's inputs "
                f"{self.input_names}; the batch has columns {sorted(batch)}"
            )
        feeds = {}
        for name in self.input_names:
            col = batch[name]
            if isinstance(col, np.ndarray) and col.dtype == object:  # ragged-capable tensor column
                col = np.stack(list(col))
            feeds[name] = np.ascontiguousarray(col)
        rows = {len(v) for v in feeds.values() if v.ndim > 0}
        if len(rows) > 1:
            raise BatchError(f"batch {self._batches} of model {self.model_name}: input columns differ in length {rows}")
        return feeds, rows.pop() if rows else 1

    def __call__(self, batch: Mapping[str, Any]) -> dict[str, Any]:
        feeds, n = self._feeds(batch)
        first = self._rows
        t0 = time.perf_counter()
        try:
            values = self._run(feeds, n)
        except Exception as e:
            raise BatchError(
                f"batch {self._batches} (rows {first}..{first + n - 1} of this worker, pid {os.getpid()}) of model "
                f"{self.model_name} failed: {e}"
            ) from e
        self._run_s += time.perf_counter() - t0
        out: dict[str, Any] = {k: v for k, v in batch.items() if self.keep_inputs or k not in self.input_names}
        for name, value in zip(self.output_names, values, strict=True):
            if name in out:
                raise BatchError(
                    f"model {self.model_name}: output {name!r} has the name of a column that passes through; "
                    "rename the column or pass keep_inputs=False"
                )
            if np.ndim(value) == 0 or len(value) != n:
                raise BatchError(
                    f"batch {self._batches} of model {self.model_name}: output {name!r} has shape "
                    f"{list(np.shape(value))}, not {n} rows: the model's first dimension must be the row dimension"
                )
            out[name] = value
        self._batches += 1
        self._rows += n
        now = time.perf_counter()
        if self.log_every_s >= 0 and now - self._last_log >= self.log_every_s:
            self._last_log = now
            s = self.stats()
            log.info(
                "ortquant.ray worker pid %d: %d rows in %d batches, %.0f rows/s in onnxruntime (%d threads)",
                os.getpid(), s["rows"], s["batches"], s["rows_per_s"], self.threads,
            )  # fmt: skip
        return out


def predict(
    ds: Any,
    model: str | os.PathLike[str] | bytes,
    *,
    concurrency: int,
    batch_size: int,
    num_cpus: float = 1,
    **predictor_kwargs: Any,
) -> tuple[Any, dict[str, float]]:
    """Run ``model`` over a Ray Dataset and materialize the result; returns (dataset, figures).

    The figures: ``rows``, ``seconds`` (wall time of the whole map, including worker start-up) and ``rows_per_s``.
    ``predictor_kwargs`` go to :class:`Predictor`.
    """
    t0 = time.perf_counter()
    out = ds.map_batches(
        Predictor,
        fn_constructor_kwargs={"model": model, **predictor_kwargs},
        concurrency=concurrency,
        batch_size=batch_size,
        num_cpus=num_cpus,
        batch_format="numpy",
    ).materialize()
    seconds = time.perf_counter() - t0
    rows = out.count()
    figures = {"rows": rows, "seconds": seconds, "rows_per_s": rows / seconds if seconds > 0 else 0.0}
    log.info("ortquant.ray.predict: %d rows in %.2f s, %.0f rows/s", rows, seconds, figures["rows_per_s"])
    return out, figures
