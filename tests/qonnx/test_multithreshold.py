"""QONNX MultiThreshold: C++ (through onnxruntime and through ortquant._C on every ISA) vs the numpy reference,
and vs qonnx 1.0.0 where 1.0.0 and qonnx main agree on the channel axis (decision 8)."""

from __future__ import annotations

import numpy as np
import pytest
from qonnx_oracle import HAVE_QONNX, qonnx_execute, qonnx_node

import ortquant
from conftest import SPECIAL_F32, assert_bitexact, make_node_model, run_model, run_node
from ortquant import kernels
from ortquant.reference import qonnx_structural as ref

DOMAINS = ["qonnx.custom_op.general", "finn.custom_op.general", "onnx.brevitas"]
ISAS = [i for i in ("scalar", "avx2", "avx512") if i in kernels.supported_isas()]  # set_isa refuses the rest


@pytest.fixture(params=ISAS)
def isa(request):
    kernels.set_isa(request.param)
    yield request.param
    kernels.set_isa("")


def _x(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Values on and around a grid of thresholds, plus the special float32 values."""
    x = (rng.integers(-40, 40, shape) * 0.25).astype(np.float32)
    x += rng.choice(np.array([0, 0, 1e-6, -1e-6], np.float32), shape)
    flat = x.reshape(-1)
    k = min(flat.size, SPECIAL_F32.size)
    flat[rng.choice(flat.size, k, replace=False)] = SPECIAL_F32[:k]
    return x


def _thresholds(rng: np.random.Generator, rows: int, count: int, kind: str) -> np.ndarray:
    t = (rng.integers(-36, 36, (rows, count)) * 0.25).astype(np.float32)
    if kind == "sorted":
        t.sort(axis=1)
    elif kind == "special" and count >= 4:
        # Unsorted, duplicates, NaN (never counts), +-inf and signed zeros.
        t[:, 0] = np.nan
        t[:, 1] = -np.inf
        t[:, 2] = np.inf
        t[:, 3] = -0.0
        if count > 4:
            t[:, 4] = t[:, -1]
        if rows > 1:
            t[0, :] = np.nan
    return t


COUNTS = [0, 1, 3, 7, 15, 16, 17, 31, 32, 33, 63, 255, 256, 1000]


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("kind", ["sorted", "random", "special"])
def test_kernels_channels_first(isa, count, kind, rng):
    x = _x(rng, (2, 5, 7, 3))
    for rows in (5, 1):
        t = _thresholds(rng, rows, count, kind)
        for scale, bias in [(1.0, 0.0), (-0.5, 2.25), (0.1, -0.3)]:
            got = kernels.multithreshold(x, t, scale, bias, "NCHW")
            assert_bitexact(got, ref.multithreshold(x, t, scale, bias, "NCHW"))


@pytest.mark.parametrize("count", COUNTS)
@pytest.mark.parametrize("channels", [1, 2, 3, 5, 8, 16, 17, 64])
def test_kernels_channels_last(isa, count, channels, rng):
    x = _x(rng, (3, 7, channels))
    for kind in ("random", "special"):
        t = _thresholds(rng, channels, count, kind)
        got = kernels.multithreshold(x, t, 2.0, -1.0, "NWC")
        assert_bitexact(got, ref.multithreshold(x, t, 2.0, -1.0, "NWC"))


@pytest.mark.parametrize("shape", [(4, 6), (2, 6, 1, 1), (3, 6, 2), (1, 6, 2, 2, 2), (37, 6, 5)])
@pytest.mark.parametrize("count", [15, 255, 1000])
def test_kernels_short_runs_and_ranks(isa, shape, count, rng):
    """Channel runs shorter than a vector (inner = 1, 2, 4, 8 ...) and ranks 2 to 5."""
    x = _x(rng, shape)
    t = _thresholds(rng, 6, count, "random")
    assert_bitexact(kernels.multithreshold(x, t), ref.multithreshold(x, t))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("count", [3, 15, 31, 255])
@pytest.mark.parametrize("chunk", [1, 7, 33, 100, 1000])
def test_kernels_split_anywhere(isa, layout, count, chunk, rng):
    """Work split at arbitrary element boundaries (mid-pixel, mid-run) gives the same result."""
    x = _x(rng, (3, 9, 11, 13))
    channels = 13 if layout == "NHWC" else 9
    t = _thresholds(rng, channels, count, "special")
    got = kernels.multithreshold(x, t, 0.5, 0.25, layout, chunk=chunk)
    assert_bitexact(got, ref.multithreshold(x, t, 0.5, 0.25, layout))


def test_every_value_counts_like_counting(isa):
    """Exhaustive over a dense value grid: search == counting for every value incl. NaN, +-inf, +-0."""
    t = np.array(
        [[-np.inf, -1.0, -0.0, 0.0, 0.5, 0.5, 1.0, np.inf, np.nan, 3.0, -2.0, 2.0, 2.0, 7.0, -7.0]], np.float32
    )
    grid = np.concatenate(
        [np.arange(-8, 8, 0.25, dtype=np.float32), SPECIAL_F32, np.nextafter(t[0], np.float32(np.inf))]
    )
    grid = np.concatenate([grid, np.nextafter(t[0], np.float32(-np.inf))]).astype(np.float32)
    x = grid.reshape(1, 1, -1)
    got = kernels.multithreshold(x, t)
    want = np.array([[[np.count_nonzero(v >= t[0]) for v in grid]]], np.float32)
    assert_bitexact(got, want)
    # x = NaN counts 0, x = +inf counts every non-NaN threshold.
    special = kernels.multithreshold(np.array([[np.nan, np.inf, -np.inf]], np.float32), t)
    assert special.tolist() == [[0.0, 14.0, 1.0]]


@pytest.mark.parametrize("domain", DOMAINS)
@pytest.mark.parametrize("const", [False, True])
def test_ort_matches_reference(domain, const, rng):
    x = _x(rng, (2, 8, 5, 5))
    t = _thresholds(rng, 8, 15, "random")
    attrs = {"out_dtype": "UINT4", "out_scale": 0.5, "out_bias": -1.0}
    (y,) = run_node("MultiThreshold", domain, [x, t], const=[False, const], attrs=attrs)
    assert_bitexact(y, ref.multithreshold(x, t, 0.5, -1.0))


@pytest.mark.parametrize("layout", ["NHWC", "NC", "NWC", "C"])
def test_ort_channels_last_layouts(layout, rng):
    rank = len(layout)
    shape = (2, 4, 3, 6)[-rank:] if rank < 4 else (2, 4, 3, 6)
    x = _x(rng, shape)
    t = _thresholds(rng, 6, 7, "special")
    (y,) = run_node("MultiThreshold", DOMAINS[0], [x, t], const=[False, True], attrs={"data_layout": layout})
    assert_bitexact(y, ref.multithreshold(x, t, data_layout=layout))


def test_ort_large_parallel_runtime_thresholds(rng):
    x = (rng.standard_normal((4, 32, 32, 67)) * 4).astype(np.float32)
    t = np.sort(rng.standard_normal((67, 255)).astype(np.float32) * 4, axis=1)
    for threads in (1, 2):
        for const in (False, True):
            (y,) = run_node(
                "MultiThreshold",
                DOMAINS[0],
                [x, t],
                const=[False, const],
                threads=threads,
                attrs={"data_layout": "NHWC"},
            )
            assert_bitexact(y, ref.multithreshold(x, t, data_layout="NHWC"))


def test_constant_node_is_folded_and_exact(rng):
    x = _x(rng, (2, 3, 4))
    t = _thresholds(rng, 3, 5, "random")
    model, _ = make_node_model("MultiThreshold", DOMAINS[0], [x, t], const=True, attrs={"out_scale": 3.0})
    sess = ortquant.InferenceSession(model)
    for _ in range(2):
        (y,) = sess.run(None, {})
        assert_bitexact(y, ref.multithreshold(x, t, 3.0))


def test_empty_input_and_no_thresholds(rng):
    (y,) = run_node("MultiThreshold", DOMAINS[0], [np.zeros((0, 3), np.float32), np.ones((3, 2), np.float32)])
    assert y.shape == (0, 3) and y.dtype == np.float32
    x = _x(rng, (2, 3))
    (y,) = run_node("MultiThreshold", DOMAINS[0], [x, np.zeros((3, 0), np.float32)], attrs={"out_bias": 1.5})
    assert_bitexact(y, np.full((2, 3), 1.5, np.float32))


# ---- vs qonnx 1.0.0 -------------------------------------------------------------------------------------

# (shape, data_layout or None): cases where qonnx 1.0.0's rank guess / 'C' index and qonnx main's rule agree.
AGREEING = [
    ((3, 6), None),
    ((2, 6, 3, 4), None),
    ((2, 6, 3, 4, 2), None),
    ((2, 3, 4, 6), "NHWC"),
    ((3, 6), "NC"),
    ((2, 5, 6), "NWC"),
    ((2, 6, 5), "NCW"),
    ((2, 6, 3, 4), "NCHW"),
]


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
@pytest.mark.parametrize("shape,layout", AGREEING)
@pytest.mark.parametrize("per_channel", [True, False])
def test_against_qonnx(shape, layout, per_channel, rng):
    attrs = {"out_dtype": "INT4", "out_scale": 0.75, "out_bias": -3.0}
    if layout is not None:
        attrs["data_layout"] = layout
    channels = shape[-1] if layout is not None and layout.endswith("C") else shape[1]
    x = _x(rng, shape)
    t = _thresholds(rng, channels if per_channel else 1, 15, "special")
    want = qonnx_execute(qonnx_node("MultiThreshold", 2, **attrs), [x, t])
    (got,) = run_node("MultiThreshold", DOMAINS[0], [x, t], const=[False, True], attrs=attrs)
    assert_bitexact(got, want.astype(np.float32))
    assert want.dtype == np.float32


@pytest.mark.skipif(not HAVE_QONNX, reason="qonnx not installed")
def test_rank3_default_layout_follows_qonnx_main(rng):
    """Rank 3 without data_layout: qonnx 1.0.0 guesses NWC (channels on axis 2); qonnx main (and ortquant,
    decision 8) uses axis 1. qonnx main's execute_node calls multithreshold(v, t, scale, bias, False)."""
    from qonnx.custom_op.general.multithreshold import multithreshold as qonnx_multithreshold

    x = _x(rng, (2, 6, 5))
    t = _thresholds(rng, 6, 7, "random")
    (got,) = run_node("MultiThreshold", DOMAINS[0], [x, t], const=[False, True], attrs={"out_scale": 2.0})
    assert_bitexact(got, ref.multithreshold(x, t, 2.0))
    assert_bitexact(got, qonnx_multithreshold(x, t, 2.0, 0.0, channels_last=False))
    # qonnx 1.0.0 reads axis 2 here (5 channels), so 6 threshold rows do not even fit.
    with pytest.raises(AssertionError):
        qonnx_execute(qonnx_node("MultiThreshold", 2, out_dtype="INT4", out_scale=2.0), [x, t])


# ---- bad input ------------------------------------------------------------------------------------------


def _error(model_feeds) -> str:
    with pytest.raises(Exception) as e:
        run_model(*model_feeds)
    return str(e.value)


def test_threshold_rows_must_be_channels_or_one(rng):
    x = _x(rng, (2, 4, 3))
    for const in (False, True):
        msg = _error(
            make_node_model("MultiThreshold", DOMAINS[0], [x, np.ones((3, 2), np.float32)], const=[False, const])
        )
        assert "multithreshold_node" in msg and "thresholds" in msg and "3 rows" in msg


def test_thresholds_must_be_2d():
    x = np.ones((2, 4), np.float32)
    msg = _error(
        make_node_model("MultiThreshold", DOMAINS[0], [x, np.ones((4, 2, 1), np.float32)], const=[False, True])
    )
    assert "multithreshold_node" in msg and "2-D" in msg
    msg = _error(make_node_model("MultiThreshold", DOMAINS[0], [x, np.ones(4, np.float32)]))
    assert "multithreshold_node" in msg and "2-D" in msg


def test_channels_first_needs_rank_2():
    msg = _error(make_node_model("MultiThreshold", DOMAINS[0], [np.ones(4, np.float32), np.ones((1, 2), np.float32)]))
    assert "multithreshold_node" in msg and "axis 1" in msg


def test_wrong_dtype():
    msg = _error(make_node_model("MultiThreshold", DOMAINS[0], [np.ones((2, 4)), np.ones((4, 2), np.float32)]))
    assert "multithreshold_node" in msg and "double" in msg


def test_wrong_input_count():
    msg = _error(make_node_model("MultiThreshold", DOMAINS[0], [np.ones((2, 4), np.float32)]))
    assert "multithreshold_node" in msg
    x = np.ones((2, 4), np.float32)
    msg = _error(make_node_model("MultiThreshold", DOMAINS[0], [x, np.ones((4, 2), np.float32), x]))
    assert "multithreshold_node" in msg


def test_bad_attribute_type():
    x = np.ones((2, 4), np.float32)
    for attrs, name in [
        ({"out_scale": "big"}, "out_scale"),
        ({"data_layout": 3}, "data_layout"),
        ({"out_dtype": 4}, "out_dtype"),
    ]:
        msg = _error(make_node_model("MultiThreshold", DOMAINS[0], [x, np.ones((4, 2), np.float32)], attrs=attrs))
        assert "multithreshold_node" in msg and f"'{name}'" in msg
