"""Regression tests of issue 9 (a malformed model must give an onnxruntime error naming the node and the problem,
never a crash, a hang, a huge allocation or wrong results), one minimal model per defect found by the fuzzer:

1. AvgPool2dInt with a zero stride: SIGFPE in shape inference at session creation.
2. BatchNorm2dInt / BatchNorm1dInt on an empty batch: SIGFPE at run time.
3. Conv2dInt / depthwise / Conv1dInt with stride_w > W + pad_left: heap over-read, run-dependent results.
4. Absurd sizes from a few bytes of model: strides/pads/dilations/output sizes capped with errors naming the
   attribute and the limit (docs/ops.md, Limits), never a bare std::bad_alloc.
5. Attributes near 2**62: no signed overflow, an error naming the attribute.
6. Invalid UTF-8 in a string attribute: the error is still text.
7. ortquant.InferenceSession(m, sess_options=so) with so registered the plain onnxruntime way.
8. GenericPartition with an untyped graph output: the designed "not supported" message.
9. Registration on an onnxruntime older than the supported range is refused with the versions needed.
"""

from __future__ import annotations

import ctypes
import os

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import ortquant
from conftest import IR_VERSION, assert_bitexact, make_node_model, run_model
from ortquant.reference import linger_matrix as lref

T = TensorProto
L = "thinker"
ORT_ERRORS = (Exception,)
MAX_TENSOR_BYTES = 1 << 32


def _error(model: onnx.ModelProto, feeds: dict[str, np.ndarray] | None = None) -> str:
    """The onnxruntime error of creating (and running) a model that must fail; plain onnxruntime + the library."""
    so = ort.SessionOptions()
    so.log_severity_level = 4
    so.register_custom_ops_library(ortquant.library_path())
    try:
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        sess.run(None, feeds or {})
    except UnicodeDecodeError as e:  # the bug of item 6: not a text error
        raise AssertionError(f"error text is not valid UTF-8: {e!r}") from e
    except Exception as e:
        return str(e)
    raise AssertionError("the model did not fail")


def _check(msg: str, *parts: str) -> None:
    for p in parts:
        assert p in msg, f"{p!r} not in {msg!r}"


def _i8(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, shape).astype(np.int8)


# ---- 1. AvgPool2dInt zero stride ---------------------------------------------------------------------------


def _avgpool(strides, pads=(0, 0, 0, 0), kernel=(2, 2), x=None):
    x = _i8(1, 2, 4, 4) if x is None else x
    attrs = {
        "kernel_shape": list(kernel),
        "strides": list(strides),
        "pads": list(pads),
        "data_bits": 8,
        "scale_x": 16.0,
        "platform_quant": "luna_quant",
    }
    return make_node_model("AvgPool2dInt", L, [x], attrs=attrs, output_dtypes=[T.INT8])


@pytest.mark.skipif(os.environ.get("ORTQUANT_SANITIZED") != "1", reason="only under make test-asan")
def test_sanitized_run_loads_the_sanitized_library():
    """make test-asan must test its own build: an ortquant imported from elsewhere (python/, an install) would load
    a library without AddressSanitizer and the run would check nothing."""
    from ortquant import _C

    for path in (ortquant.library_path(), _C.__file__):
        with open(path, "rb") as f:
            assert b"__asan_init" in f.read(), f"{path} is not the AddressSanitizer build"


@pytest.mark.parametrize("strides", [[0, 0], [1, 0], [0, 1], [-1, 1], [1, -(2**63)]])
def test_avgpool_zero_stride_is_an_error_at_creation(strides):
    model, feeds = _avgpool(strides)
    _check(_error(model, feeds), "avgpool2dint_node", "strides")


@pytest.mark.parametrize("pads", [[2**62, 0, 0, 0], [0, 2**62, 0, 2**62], [-(2**62), 0, 0, 0]])
def test_avgpool_absurd_pads(pads):
    model, feeds = _avgpool([1, 1], pads)
    _check(_error(model, feeds), "avgpool2dint_node", "pads")


# ---- 2. BatchNorm on an empty batch -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "op,shape",
    [
        ("BatchNorm2dInt", (0, 3, 4, 4)),
        ("BatchNorm1dInt", (0, 3, 5)),
        ("BatchNorm1dInt", (0, 3)),
        ("BatchNorm2dInt", (2, 3, 0, 4)),
    ],
)
def test_batchnorm_empty_batch(op, shape):
    c = shape[1]
    inputs = [
        np.zeros(shape, np.int8),
        np.ones(c, np.int8),
        np.zeros(c, np.int32),
        np.zeros(c, np.float32),
        np.ones(c, np.float32),
    ]
    attrs = {"scale_x": 32.0, "scale_w": 64.0, "scale_o": 64.0, "o_bits": 8, "data_bits": 8}
    model, feeds = make_node_model(
        op, L, inputs, const=[False, True, True, True, True], attrs=attrs, output_dtypes=[T.INT8]
    )
    (y,) = run_model(model, feeds)
    assert y.shape == shape and y.dtype == np.int8


# ---- 3. narrow inputs with large strides (the stride-phase column count) -------------------------------------

# (in_w, kw, stride_w, pad_l, pad_r, dil_w): every one has stride_w > W + pad_left, or close to it.
NARROW = [
    (1, 1, 3, 1, 1, 1),
    (6, 1, 64, 0, 0, 1),
    (1, 3, 5, 1, 1, 1),
    (2, 1, 7, 2, 0, 1),
    (3, 2, 9, 1, 4, 2),
    (1, 1, 64, 0, 63, 1),
    (5, 3, 17, 3, 3, 1),
    (2, 2, 33, 1, 1, 3),
    (4, 1, 6, 5, 1, 1),
]


def _conv_ref(x, w, b, s, p, d, group, scale_x, scale_w, scale_o):
    return lref.conv2d(x, w, b, scale_x, scale_w, scale_o, 8, s, p, d, group)


@pytest.mark.parametrize("in_w,kw,sw,pl,pr,dw", NARROW)
@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("const_w", [True, False])
def test_conv2d_narrow_input_large_stride_matches_reference(in_w, kw, sw, pl, pr, dw, depthwise, const_w):
    c = 4
    m, cg, group = (c, 1, c) if depthwise else (3, c, 1)
    x, w = _i8(2, c, 5, in_w, seed=1), _i8(m, cg, 2, kw, seed=2)
    b = np.arange(m, dtype=np.int32) * 7 - 5
    s, p, d = (2, sw), (1, pl, 0, pr), (1, dw)
    if (in_w + pl + pr) < dw * (kw - 1) + 1:
        pytest.skip("kernel larger than the padded input")
    attrs = {
        "strides": list(s),
        "pads": list(p),
        "dilations": list(d),
        "group": group,
        "scale_x": 16.0,
        "scale_w": 64.0,
        "scale_o": 4.0,
        "o_bits": 8,
        "platform_quant": "luna_quant",
    }
    model, feeds = make_node_model(
        "Conv2dInt", L, [x, w, b], const=[False, const_w, const_w], attrs=attrs, output_dtypes=[T.INT8]
    )
    want = _conv_ref(x, w, b, s, p, d, group, 16.0, 64.0, 4.0)
    for _ in range(3):  # the over-read gave run-dependent results
        assert_bitexact(run_model(model, feeds)[0], want)


@pytest.mark.parametrize("in_w,kw,sw,pl,pr,dw", NARROW)
def test_conv1d_narrow_input_large_stride_matches_reference(in_w, kw, sw, pl, pr, dw):
    if (in_w + pl + pr) < dw * (kw - 1) + 1:
        pytest.skip("kernel larger than the padded input")
    x, w = _i8(1, 3, in_w, seed=3), _i8(2, 3, kw, seed=4)
    attrs = {
        "strides": [sw],
        "pads": [pl, pr],
        "dilations": [dw],
        "scale_x": 16.0,
        "scale_w": 64.0,
        "scale_o": 4.0,
        "o_bits": 8,
        "platform_quant": "luna_quant",
    }
    model, feeds = make_node_model("Conv1dInt", L, [x, w], const=[False, True], attrs=attrs, output_dtypes=[T.INT8])
    want = lref.conv1d(x, w, None, 16.0, 64.0, 4.0, 8, sw, (pl, pr), dw)
    assert_bitexact(run_model(model, feeds)[0], want)


# ---- 4. absurd sizes: limits with errors naming the attribute ------------------------------------------------


def _conv2d_model(**kw):
    attrs = {"scale_x": 16.0, "scale_w": 64.0, "scale_o": 4.0, "o_bits": 8, "platform_quant": "luna_quant", **kw}
    return make_node_model(
        "Conv2dInt", L, [_i8(1, 2, 6, 6), _i8(2, 2, 3, 3)], const=[False, True], attrs=attrs, output_dtypes=[T.INT8]
    )


@pytest.mark.parametrize(
    "strides,dim", [([10**8, 1], "height"), ([1, 10**8], "width"), ([65, 1], "height"), ([1, 65], "width")]
)
def test_conv_strides_capped_in_both_dims(strides, dim):
    msg = _error(*_conv2d_model(strides=strides))
    _check(msg, "conv2dint_node", "'strides'", dim, "64")


@pytest.mark.parametrize(
    "attr,value",
    [
        ("dilations", [1, 2**62]),
        ("dilations", [2**40, 1]),
        ("pads", [0, 2**62, 0, 0]),
        ("pads", [10**9, 0, 10**9, 0]),
        ("group", [2**62]),
    ],
)
def test_conv_absurd_attributes(attr, value):
    v = value[0] if attr == "group" else value
    _check(_error(*_conv2d_model(**{attr: v})), "conv2dint_node", f"'{attr}'")


def test_conv1d_huge_pads():
    attrs = {"pads": [10**9, 10**9], "scale_x": 16.0, "scale_w": 64.0, "platform_quant": "luna_quant"}
    model, feeds = make_node_model("Conv1dInt", L, [_i8(1, 2, 6), _i8(2, 2, 3)], const=[False, True], attrs=attrs)
    _check(_error(model, feeds), "conv1dint_node", "'pads'", "65536")


@pytest.mark.parametrize(
    "attr,value",
    [
        ("strides", [2**62, 1]),
        ("strides", [1, 1000]),
        ("group", 2**62),
        ("dilations", [2**62, 1]),
        ("pads", [0, 0, 2**62, 0]),
    ],
)
def test_conv_transpose_absurd_attributes(attr, value):
    attrs = {"scale_x": 16.0, "scale_w": 64.0, "platform_quant": "luna_quant", attr: value}
    model, feeds = make_node_model(
        "ConvTranspose2dInt", L, [_i8(1, 2, 3, 3), _i8(2, 1, 2, 2)], const=[False, True], attrs=attrs
    )
    _check(_error(model, feeds), "convtranspose2dint_node", f"'{attr}'")


def test_conv_transpose_output_over_the_byte_limit():
    # 64 x 64 strides on a 2048 x 2048 input: a (1, 2, 131009, 131009) output (34 GB float32).
    attrs = {"scale_x": 16.0, "scale_w": 64.0, "platform_quant": "luna_quant", "strides": [64, 64]}
    x = np.zeros((1, 1, 2048, 2048), np.int8)
    model, feeds = make_node_model("ConvTranspose2dInt", L, [x, _i8(1, 2, 2, 2)], const=[False, True], attrs=attrs)
    _check(_error(model, feeds), "convtranspose2dint_node", "output 0", "bytes", str(MAX_TENSOR_BYTES))


@pytest.mark.parametrize("pads", [[0, 0, 10**9, 0], [2**62, 0, 2**62, 0], [0, -(2**63), 0, 0], [0, -70000, 0, 0]])
def test_iqpad_absurd_pads(pads):
    x = _i8(1, 3)
    model, feeds = make_node_model(
        "iqPad", L, [x, np.array(pads, np.int64)], attrs={"mode": "constant"}, output_dtypes=[T.INT8]
    )
    msg = _error(model, feeds)
    _check(msg, "iqpad_node")
    assert "pads" in msg or "limit" in msg, msg


def test_iqpad_output_over_the_byte_limit():
    # Each pad within the limit, the output (65536 * 2 + 1)^2 * 300 bytes over it.
    x = np.zeros((300, 1, 1), np.int8)
    pads = np.array([0, 65536, 65536, 0, 65536, 65536], np.int64)
    model, feeds = make_node_model("iqPad", L, [x, pads], attrs={"mode": "constant"}, output_dtypes=[T.INT8])
    _check(_error(model, feeds), "iqpad_node", "output 0", str(MAX_TENSOR_BYTES))


@pytest.mark.parametrize(
    "attr,value",
    [
        ("pad_amount", [2**62, 0, 0, 0]),
        ("pad_amount", [10**9] * 4),
        ("stride", [2**62, 1]),
        ("dilations", [1, 2**62]),
        ("kernel_size", [2**31, 1]),
    ],
)
def test_im2col_absurd_attributes(attr, value):
    attrs = {"kernel_size": [2, 2], "stride": [1, 1], attr: value}
    model, feeds = make_node_model(
        "Im2Col", "qonnx.custom_op.general", [np.zeros((1, 4, 4, 2), np.float32)], attrs=attrs
    )
    _check(_error(model, feeds), "im2col_node", f"'{attr}'", "65536")


def test_im2col_output_over_the_byte_limit():
    attrs = {"kernel_size": [256, 256], "stride": [1, 1], "pad_amount": [0, 0, 0, 0]}
    model, feeds = make_node_model(
        "Im2Col", "qonnx.custom_op.general", [np.zeros((1, 600, 600, 4), np.float32)], attrs=attrs
    )
    _check(_error(model, feeds), "im2col_node", "output 0", str(MAX_TENSOR_BYTES))


# ---- 5. LSTM / GRU hidden_size near 2**62 -------------------------------------------------------------------


@pytest.mark.parametrize("op", ["LSTMInt", "GRUInt"])
@pytest.mark.parametrize("hidden", [2**62, 2**61 + 1, 2**31, 65537, 0, -1])
def test_rnn_absurd_hidden_size(op, hidden):
    g = 4 if op == "LSTMInt" else 3
    inputs = [_i8(3, 1, 2), _i8(g * 2, 2), _i8(g * 2, 2)]
    attrs = {
        "hidden_size": hidden,
        "scale_i": 16.0,
        "scale_h": 32.0,
        "scale_iw": 64.0,
        "scale_hw": 64.0,
        "platform_quant": "luna_quant",
    }
    n_out = 3 if op == "LSTMInt" else 2
    model, feeds = make_node_model(op, L, inputs, const=[False, True, True], attrs=attrs, n_outputs=n_out)
    _check(_error(model, feeds), f"{op.lower()}_node", "'hidden_size'")


# ---- 6. invalid UTF-8 in a string attribute ----------------------------------------------------------------


@pytest.mark.parametrize("bad", [b"\xff\xfe", b"abc\x80def", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"])
def test_invalid_utf8_attribute_gives_a_text_error(bad):
    x = np.zeros((2, 3), np.float32)
    model, feeds = make_node_model(
        "Quant", L, [x], attrs={"scale_x": 1.0, "platform_quant": bad}, output_dtypes=[T.INT8]
    )
    msg = _error(model, feeds)  # raises AssertionError on UnicodeDecodeError
    _check(msg, "quant_node", "platform_quant", "\\x")


def test_invalid_utf8_through_the_session_helper():
    model, _ = make_node_model(
        "GenericPartition", "qonnx.custom_op.general", [np.zeros(2, np.float32)], attrs={"model": b"part\xff.onnx"}
    )
    with pytest.raises(Exception) as e:
        ortquant.InferenceSession(model)
    assert not isinstance(e.value, UnicodeDecodeError)
    _check(str(e.value), "genericpartition_node", "not supported", "part\\xff.onnx")


# ---- 7. a SessionOptions already registered the plain way ---------------------------------------------------


def _quant_model():
    return make_node_model(
        "Quant",
        L,
        [np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)],
        attrs={"scale_x": 16.0},
        output_dtypes=[T.INT8],
    )


def test_session_helper_accepts_options_registered_the_plain_way():
    model, feeds = _quant_model()
    so = ort.SessionOptions()
    so.register_custom_ops_library(ortquant.library_path())
    (y,) = ortquant.InferenceSession(model, sess_options=so).run(None, feeds)
    assert y.dtype == np.int8 and y.shape == (3, 4)
    # and the same options again, and registered twice the plain way
    ortquant.InferenceSession(model, sess_options=so).run(None, feeds)
    so2 = ort.SessionOptions()
    so2.register_custom_ops_library(ortquant.library_path())
    so2.register_custom_ops_library(ortquant.library_path())
    sess = ort.InferenceSession(model.SerializeToString(), so2, providers=["CPUExecutionProvider"])
    assert_bitexact(sess.run(None, feeds)[0], y)


def test_register_then_plain_registration():
    model, feeds = _quant_model()
    so = ortquant.register(ort.SessionOptions())
    so.register_custom_ops_library(ortquant.library_path())
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    assert sess.run(None, feeds)[0].shape == (3, 4)


# ---- 8. GenericPartition with an untyped graph output -------------------------------------------------------


@pytest.mark.parametrize("n_outputs", [1, 2])
def test_genericpartition_untyped_output(n_outputs):
    x = helper.make_tensor_value_info("x", T.FLOAT, [2, 3])
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(
        "GenericPartition", ["x"], outs, domain="qonnx.custom_op.general", name="gp", model="partition_0.onnx"
    )
    graph = helper.make_graph([node], "g", [x], [helper.ValueInfoProto(name=o) for o in outs])
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("qonnx.custom_op.general", 1)]
    )
    model.ir_version = IR_VERSION
    msg = _error(model, {"x": np.zeros((2, 3), np.float32)})
    _check(msg, "GenericPartition node 'gp'", "not supported", "partition_0.onnx")


# ---- 9. registration on an onnxruntime older than the supported range ---------------------------------------

STATUS_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
GET_API_FN = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_uint32)
VERSION_FN = ctypes.CFUNCTYPE(ctypes.c_char_p)


class _ApiBase(ctypes.Structure):
    _fields_ = [("GetApi", GET_API_FN), ("GetVersionString", VERSION_FN)]


@pytest.mark.parametrize(
    "version,api_max", [("1.16.3", 16), ("1.17.3", 17), ("1.18.1", 18), ("1.14.0", 14), ("0.9.0", 9)]
)
def test_old_onnxruntime_is_refused_at_registration(version, api_max):
    """A fake OrtApiBase of an old onnxruntime: RegisterCustomOps must return an error status made with that
    runtime's CreateStatus (OrtApi slot 0, present in every API version), naming the versions needed."""
    messages: list[bytes] = []

    @STATUS_FN
    def create_status(code, msg):
        messages.append(msg)
        return 0x1234

    table = (ctypes.c_void_p * 512)()  # a fake OrtApi: only CreateStatus is ever called
    table[0] = ctypes.cast(create_status, ctypes.c_void_p).value

    @GET_API_FN
    def get_api(v):
        return ctypes.addressof(table) if v <= api_max else None

    @VERSION_FN
    def get_version():
        return version.encode()

    base = _ApiBase(get_api, get_version)
    lib = ctypes.CDLL(ortquant.library_path())
    lib.RegisterCustomOps.restype = ctypes.c_void_p
    lib.RegisterCustomOps.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    st = lib.RegisterCustomOps(None, ctypes.addressof(base))
    assert st == 0x1234, "registration must fail with a status"
    assert len(messages) == 1
    msg = messages[0].decode()
    _check(msg, "ortquant", version, "1.19")


def test_supported_range_is_documented():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "ops.md").read_text()
    assert "onnxruntime >= 1.19" in text


# ---- the error contract over a few mutations of every kind ----------------------------------------------------


@pytest.mark.parametrize("value", [0, 1, -1, 33, 64, 65, 2**62])
def test_linger_quant_bit_widths(value):
    model, feeds = make_node_model(
        "Quant", L, [np.zeros((2, 3), np.float32)], attrs={"scale_x": 1.0, "data_bits": value}, output_dtypes=[T.INT8]
    )
    msg = _error(model, feeds)
    # Below 2 the kernel names the attribute; above 16 the output type inference asks for int32, and onnxruntime's
    # own type check (the declared int8 output) names the node first.
    _check(msg, "quant_node", "data_bits" if value < 2 else "quant_node")


def test_kernel_errors_name_an_unnamed_node_by_its_first_output():
    """onnxruntime users know an unnamed node by its first output; a kernel error says that, not ''."""
    from onnx import TensorProto, helper, numpy_helper

    import ortquant

    inits = [numpy_helper.from_array(np.array(v, np.float32), n) for n, v in (("s", 0.5), ("z", 0.0), ("b", 4.0))]
    node = helper.make_node(
        "Quant", ["x", "s", "z", "b"], ["quantized_x"], domain="qonnx.custom_op.general", rounding_mode="BANANA"
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("quantized_x", TensorProto.FLOAT, [2])],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("qonnx.custom_op.general", 1)]
    )
    model.ir_version = 10
    with pytest.raises(Exception, match=r"Quant node 'quantized_x': attribute 'rounding_mode': unknown rounding mode"):
        ortquant.InferenceSession(model)
