"""A real Triton Inference Server (the ``tritonserver`` binary PyPI's ``nvidia-pytriton`` ships, with Triton's
Python backend) serving a quantized model through an ortquant session, queried over HTTP and gRPC on 127.0.0.1.

Needs ``nvidia-pytriton`` and ``tritonclient[http,grpc]``, which are not in the development venv: ``make
test-serving`` creates a venv of their own and runs this file there; elsewhere the module is skipped.

The model is models/cnn_w4a4.onnx (Brevitas QONNX). Two Triton model instances, each with its own
``ortquant.InferenceSession`` (one intra-op thread). Each request is run on its own (Triton's dynamic batcher
may hand several requests to one call; they are not concatenated), so every response must equal, bit for bit,
what a local ``ortquant.InferenceSession`` computes for that request's input. Request counts and the time are
bounded; figures (latency, throughput under concurrent clients) are printed and, with
``ORTQUANT_SERVING_REPORT=FILE``, written as JSON for BENCHMARKS.md.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest


def _require(name: str, reason: str):
    """importorskip, except under ``make test-serving`` (ORTQUANT_REQUIRE_SERVING=1), where a missing package fails."""
    if os.environ.get("ORTQUANT_REQUIRE_SERVING") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=reason)


pytriton = _require("pytriton", reason="nvidia-pytriton is not installed (make test-serving installs it)")
httpclient = _require("tritonclient.http", reason="tritonclient[http] is not installed")
grpcclient = _require("tritonclient.grpc", reason="tritonclient[grpc] is not installed")

# PyTriton 0.7.0's default tensor store starts a multiprocessing manager inside the Python backend stub, whose
# embedded libpython is older than this interpreter's standard library: on Python 3.11.7 model loading fails with
# "AttributeError: '_thread.RLock' object has no attribute '_recursion_count'" (multiprocessing/resource_tracker.py).
# PyTriton's documented switch to its base64 transport avoids the manager. Set before the server starts: the
# stub inherits the environment.
os.environ.setdefault("PYTRITON_NO_TENSORSTORE", "1")

import onnxruntime as ort  # noqa: E402
from pytriton.model_config import ModelConfig, Tensor  # noqa: E402
from pytriton.triton import Triton, TritonConfig  # noqa: E402

import ortquant  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "cnn_w4a4.onnx"
NAME = "cnn_w4a4"
INSTANCES = 2
REQUESTS_PER_CLIENT = 25
CLIENTS = 4
DEADLINE_S = 240.0  # the whole module stops sending after this


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session() -> Any:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    return ortquant.InferenceSession(MODEL, sess_options=so)


def _make_infer_func() -> Any:
    sess = _session()  # one per Triton model instance, built once

    def infer(requests: list[Any]) -> list[dict[str, np.ndarray]]:
        # One session run per request: a request's result does not depend on what else was in the batch.
        return [dict(zip(["global_out"], sess.run(None, {"global_in": r["global_in"]}), strict=True)) for r in requests]

    return infer


@pytest.fixture(scope="module")
def server():
    ports = {"http": _free_port(), "grpc": _free_port(), "metrics": _free_port()}
    config = TritonConfig(
        http_address="127.0.0.1",
        http_port=ports["http"],
        grpc_address="127.0.0.1",
        grpc_port=ports["grpc"],
        metrics_address="127.0.0.1",
        metrics_port=ports["metrics"],
        allow_metrics=False,
        exit_on_error=True,
        log_verbose=0,
    )
    # Two attempts: with several instances, PyTriton 0.7.0's stubs of instances 1.. wait only 1 s for instance 0's
    # handshake socket, which a heavily loaded machine can miss ("Timeout occurred while waiting for config file").
    for attempt in (1, 2):
        t0 = time.perf_counter()
        with Triton(config=config) as triton:
            try:
                triton.bind(
                    model_name=NAME,
                    infer_func=[_make_infer_func() for _ in range(INSTANCES)],
                    inputs=[Tensor(name="global_in", dtype=np.float32, shape=(3, 32, 32))],
                    outputs=[Tensor(name="global_out", dtype=np.float32, shape=(10,))],
                    config=ModelConfig(max_batch_size=8),
                    strict=True,
                )
                triton.run()
            except Exception:
                if attempt == 2:
                    raise
                continue
            yield {"ports": ports, "startup_s": time.perf_counter() - t0}
            return


def _clients(server: dict, protocol: str) -> tuple[Any, Any]:
    if protocol == "http":
        return httpclient, httpclient.InferenceServerClient(
            f"127.0.0.1:{server['ports']['http']}", network_timeout=60.0, connection_timeout=10.0
        )
    return grpcclient, grpcclient.InferenceServerClient(f"127.0.0.1:{server['ports']['grpc']}")


def _infer(mod: Any, client: Any, x: np.ndarray) -> np.ndarray:
    inp = mod.InferInput("global_in", list(x.shape), "FP32")
    inp.set_data_from_numpy(x)
    kw = {"client_timeout": 60.0} if mod is grpcclient else {}  # HTTP: network_timeout of the client
    res = client.infer(NAME, [inp], outputs=[mod.InferRequestedOutput("global_out")], **kw)
    return res.as_numpy("global_out")


def _bitexact(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_responses_are_bit_exact(server, protocol):
    mod, client = _clients(server, protocol)
    assert client.is_server_live() and client.is_model_ready(NAME)
    local = _session()
    rng = np.random.default_rng(7)
    for n in (1, 2, 3, 8):
        x = rng.standard_normal((n, 3, 32, 32)).astype(np.float32)
        (want,) = local.run(None, {"global_in": x})
        got = _infer(mod, client, x)
        assert _bitexact(got, want), (protocol, n, np.max(np.abs(got - want)))
    # the check can fail: a different input gives a different answer
    assert not _bitexact(_infer(mod, client, x[::-1].copy()), want)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_concurrent_clients(server, protocol):
    """CLIENTS threads x REQUESTS_PER_CLIENT requests of 4 samples; every response checked; figures reported."""
    local = _session()
    rng = np.random.default_rng(11)
    pool = [rng.standard_normal((4, 3, 32, 32)).astype(np.float32) for _ in range(16)]
    want = [local.run(None, {"global_in": x})[0] for x in pool]
    deadline = time.monotonic() + DEADLINE_S

    def client_loop(c: int) -> tuple[list[float], int]:
        mod, client = _clients(server, protocol)
        lat, bad = [], 0
        for r in range(REQUESTS_PER_CLIENT):
            if time.monotonic() > deadline:
                break
            k = (c * REQUESTS_PER_CLIENT + r) % len(pool)
            t0 = time.perf_counter()
            got = _infer(mod, client, pool[k])
            lat.append(time.perf_counter() - t0)
            bad += not _bitexact(got, want[k])
        return lat, bad

    t0 = time.perf_counter()
    with ThreadPoolExecutor(CLIENTS) as ex:
        results = list(ex.map(client_loop, range(CLIENTS)))
    wall = time.perf_counter() - t0
    lat = sorted(x for r in results for x in r[0])
    # the peer in the same run: the same requests through one local session, no server
    t1 = time.perf_counter()
    for c in range(CLIENTS):
        for r in range(REQUESTS_PER_CLIENT):
            local.run(None, {"global_in": pool[(c * REQUESTS_PER_CLIENT + r) % len(pool)]})
    local_wall = time.perf_counter() - t1
    assert sum(r[1] for r in results) == 0, "responses differ from the local session"
    assert len(lat) == CLIENTS * REQUESTS_PER_CLIENT, "the deadline cut the run short"
    fig = {
        "protocol": protocol,
        "clients": CLIENTS,
        "requests": len(lat),
        "samples_per_request": 4,
        "instances": INSTANCES,
        "p50_ms": 1e3 * statistics.median(lat),
        "p90_ms": 1e3 * lat[int(0.9 * (len(lat) - 1))],
        "requests_per_s": len(lat) / wall,
        "samples_per_s": 4 * len(lat) / wall,
        "local_samples_per_s": 4 * CLIENTS * REQUESTS_PER_CLIENT / local_wall,
        "served_over_local": (4 * len(lat) / wall) / (4 * CLIENTS * REQUESTS_PER_CLIENT / local_wall),
        "server_startup_s": server["startup_s"],
    }
    print(json.dumps(fig))
    report = os.environ.get("ORTQUANT_SERVING_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps(fig) + "\n")
