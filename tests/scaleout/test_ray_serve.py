"""The Ray Serve deployment of docs/serving.md, run for real: two replicas of an ortquant session behind Serve's HTTP
proxy on 127.0.0.1, queried with a bounded number of requests; every response equal, bit for bit, to a local
session's output for the same samples.

Needs ``ray[serve]`` (``make test-ray`` installs it in the Ray venv); elsewhere the module is skipped.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest


def _require(name: str, reason: str):
    """importorskip, except under ``make test-serving`` (ORTQUANT_REQUIRE_SERVING=1), where a missing package fails."""
    if os.environ.get("ORTQUANT_REQUIRE_SERVING") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name, reason=reason)


ray = _require("ray", reason="ray is not installed (make test-ray installs ray[data,serve] in its own venv)")
serve = _require("ray.serve", reason="ray[serve] is not installed")

import onnxruntime as ort  # noqa: E402

import ortquant  # noqa: E402

MODEL = Path(__file__).resolve().parents[2] / "models" / "cnn_w4a4.onnx"


# --- the deployment, as in docs/serving.md ----------------------------------------------------------------------
@serve.deployment(num_replicas=2, ray_actor_options={"num_cpus": 1})
class QuantModel:
    def __init__(self, path: str):
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1  # = num_cpus of the replica
        so.inter_op_num_threads = 1
        self.sess = ortquant.InferenceSession(path, sess_options=so)

    async def __call__(self, request):
        x = np.asarray((await request.json())["x"], dtype=np.float32)  # [n, 3, 32, 32]
        (y,) = self.sess.run(None, {"global_in": x})
        return {"y": y.tolist()}


# ------------------------------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def url():
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join([here, *filter(None, [os.environ.get("PYTHONPATH")])])
    ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
    port = _free_port()
    serve.start(http_options={"host": "127.0.0.1", "port": port})
    serve.run(QuantModel.bind(str(MODEL)), route_prefix="/cnn")
    yield f"http://127.0.0.1:{port}/cnn"
    serve.shutdown()
    ray.shutdown()


def _post(url: str, x: np.ndarray) -> np.ndarray:
    req = urllib.request.Request(url, data=json.dumps({"x": x.tolist()}).encode(), method="POST")
    req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=60) as r:
        return np.asarray(json.loads(r.read())["y"], dtype=np.float32)


def test_replicas_answer_bit_exact(url):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    local = ortquant.InferenceSession(MODEL, sess_options=so)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((n, 3, 32, 32)).astype(np.float32) for n in (1, 2, 4, 3, 4, 2, 1, 4) * 3]
    with ThreadPoolExecutor(4) as ex:
        got = list(ex.map(lambda x: _post(url, x), xs))
    for x, y in zip(xs, got, strict=True):
        (want,) = local.run(None, {"global_in": x})
        # float32 -> JSON (a double's shortest repr) -> float32 is exact
        assert y.shape == want.shape and y.tobytes() == want.tobytes()
