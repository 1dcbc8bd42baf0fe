"""Mutations of a valid model and its feeds: attributes (values, types, presence, invalid UTF-8), initializers
(NaN/inf/0/negative scales, bit widths 0/1/33/64/65, dtype and shape changes), graph inputs (shapes incl. empty
dims, dtypes, extreme values, LSTM/GRU lengths), node wiring (inputs dropped, added, omitted), declared output types
and the op itself (another op of the same domain on the same inputs). Deterministic for a given random.Random."""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

MAX_ELEMS = 1 << 18  # per fed or mutated tensor: the fuzzer probes sizes through attributes, not through big data

INTERESTING_INTS = [
    0,
    1,
    -1,
    2,
    3,
    4,
    5,
    7,
    8,
    9,
    15,
    16,
    17,
    24,
    31,
    32,
    33,
    63,
    64,
    65,
    127,
    128,
    255,
    256,
    1000,
    4096,
    65535,
    65536,
    65537,
    1 << 20,
    10**8,
    (1 << 31) - 1,
    1 << 31,
    1 << 32,
    1 << 62,
    (1 << 63) - 1,
    -(1 << 63),
    -(1 << 31),
    -64,
]
INTERESTING_FLOATS = [
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    -1.0,
    1.0,
    0.5,
    2.0,
    1e-45,
    1e-38,
    1e-30,
    3.4e38,
    1e30,
    65504.0,
    -128.0,
    127.0,
    0.1,
    2.0**-20,
    2.0**31,
    2.0**63,
    -(2.0**70),
]
SMALL_INTS = [0, 0, 1, -1, 2, 3, 64, 65, 1 << 62]  # zero strides, sizes near the limits, overflow bait


def pick_int(rng: random.Random) -> int:
    """An interesting int, biased toward the values that broke things (0, 1, -1, 64/65, 2**62)."""
    return rng.choice(SMALL_INTS) if rng.random() < 0.5 else rng.choice(INTERESTING_INTS)


BIT_WIDTHS = [0, 1, 2, 33, 64, 65, -1, 1.5, math.nan, math.inf, 2**40]
INTERESTING_STRINGS = [
    b"",
    b"\xff\xfe",
    b"abc\x80def",
    b"\xc3\x28",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"ROUND",
    b"floor",
    b"FLOOR",
    b"HALF_EVEN",
    b"NHWC",
    b"NCHW",
    b"NC",
    b"constant",
    b"reflect",
    b"luna_quant",
    b"mlu_quant",
    b"INT4",
    b"BIPOLAR",
    b"\x00",
    b"a\x00b",
    b"x" * 10000,
    "\u00e9\u4e2d".encode(),
    b"%s%n%x",
    b"ROUND\xff",
]
DTYPES = [
    TensorProto.FLOAT,
    TensorProto.FLOAT16,
    TensorProto.DOUBLE,
    TensorProto.INT8,
    TensorProto.UINT8,
    TensorProto.INT16,
    TensorProto.INT32,
    TensorProto.INT64,
    TensorProto.BOOL,
    TensorProto.UINT16,
]
NP_OF = {
    TensorProto.FLOAT: np.float32,
    TensorProto.FLOAT16: np.float16,
    TensorProto.DOUBLE: np.float64,
    TensorProto.INT8: np.int8,
    TensorProto.UINT8: np.uint8,
    TensorProto.INT16: np.int16,
    TensorProto.UINT16: np.uint16,
    TensorProto.INT32: np.int32,
    TensorProto.INT64: np.int64,
    TensorProto.BOOL: np.bool_,
}


class Case:
    """A model being mutated and the feeds that go with it; `log` lists the mutations applied."""

    def __init__(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray], vocab: dict[str, list], ops: dict):
        self.model = copy.deepcopy(model)
        self.feeds = {k: np.array(v) for k, v in feeds.items()}
        self.vocab = vocab  # attribute name -> example AttributeProtos seen in any seed
        self.ops = ops  # domain -> op types seen in any seed
        self.log: list[str] = []

    @property
    def nodes(self) -> list[onnx.NodeProto]:
        return list(self.model.graph.node)

    def custom_nodes(self) -> list[onnx.NodeProto]:
        return [n for n in self.model.graph.node if n.domain not in ("", "ai.onnx")]


def _cap(shape: list[int]) -> list[int]:
    shape = [max(0, int(d)) for d in shape]
    while int(np.prod(shape, dtype=np.int64)) > MAX_ELEMS:
        i = int(np.argmax(shape))
        shape[i] = max(1, shape[i] // 2)
    return shape


def _values(rng: random.Random, dtype, shape: list[int]) -> np.ndarray:
    nd = np.random.default_rng(rng.getrandbits(32))
    t = np.dtype(dtype)
    if t.kind == "f":
        a = nd.standard_normal(shape).astype(t) * t.type(rng.choice([1, 4, 100]))
    elif t.kind == "b":
        a = nd.integers(0, 2, shape).astype(t)
    else:
        info = np.iinfo(t)
        a = nd.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(t)
    return a


def _extreme(rng: random.Random, a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    if a.size == 0:
        return a
    flat = a.reshape(-1)
    k = rng.randint(1, max(1, min(flat.size, 4)))
    for _ in range(k):
        i = rng.randrange(flat.size)
        if a.dtype.kind == "f":
            flat[i] = rng.choice(INTERESTING_FLOATS)
        elif a.dtype.kind == "b":
            flat[i] = not flat[i]
        else:
            info = np.iinfo(a.dtype)
            flat[i] = rng.choice([info.min, info.max, 0, -1 if info.min < 0 else 0, 1, info.max // 2])
    return flat.reshape(a.shape)


# ---- attribute mutations ---------------------------------------------------------------------------------------


def _pick_attr(rng: random.Random, c: Case, types: tuple[int, ...]) -> tuple[onnx.NodeProto, int] | None:
    cands = [(n, i) for n in c.custom_nodes() for i, a in enumerate(n.attribute) if a.type in types]
    return rng.choice(cands) if cands else None


def m_attr_int(rng: random.Random, c: Case) -> bool:
    p = _pick_attr(rng, c, (AttributeProto.INT,))
    if not p:
        return False
    n, i = p
    v = pick_int(rng) if rng.random() < 0.8 else n.attribute[i].i + rng.choice([-2, -1, 1, 2])
    n.attribute[i].i = max(-(1 << 63), min((1 << 63) - 1, v))
    c.log.append(f"attr_int {n.name}.{n.attribute[i].name}={n.attribute[i].i}")
    return True


def m_attr_ints(rng: random.Random, c: Case) -> bool:
    p = _pick_attr(rng, c, (AttributeProto.INTS,))
    if not p:
        return False
    n, i = p
    a = n.attribute[i]
    vals = list(a.ints)
    r = rng.random()
    if vals and r < 0.6:
        vals[rng.randrange(len(vals))] = pick_int(rng)
    elif r < 0.75:
        vals = vals[:-1]
    elif r < 0.9:
        vals = [*vals, rng.choice(INTERESTING_INTS)]
    else:
        vals = [pick_int(rng)] * rng.choice([1, 2, 4, 8])
    del a.ints[:]
    a.ints.extend(vals)
    c.log.append(f"attr_ints {n.name}.{a.name}={vals}")
    return True


def m_attr_float(rng: random.Random, c: Case) -> bool:
    p = _pick_attr(rng, c, (AttributeProto.FLOAT,))
    if not p:
        return False
    n, i = p
    n.attribute[i].f = rng.choice(INTERESTING_FLOATS)
    c.log.append(f"attr_float {n.name}.{n.attribute[i].name}={n.attribute[i].f}")
    return True


def m_attr_string(rng: random.Random, c: Case) -> bool:
    p = _pick_attr(rng, c, (AttributeProto.STRING,))
    if not p:
        n = rng.choice(c.custom_nodes() or c.nodes)
        name = rng.choice(
            ["rounding_mode", "platform_quant", "mode", "data_layout", "out_dtype", "round_mode", "auto_pad"]
        )
        n.attribute.append(helper.make_attribute(name, rng.choice(INTERESTING_STRINGS)))
        c.log.append(f"attr_string_add {n.name}.{name}")
        return True
    n, i = p
    n.attribute[i].s = rng.choice(INTERESTING_STRINGS)
    c.log.append(f"attr_string {n.name}.{n.attribute[i].name}={n.attribute[i].s[:20]!r}")
    return True


def _random_attr(rng: random.Random, name: str) -> AttributeProto:
    k = rng.randrange(6)
    if k == 0:
        return helper.make_attribute(name, rng.choice(INTERESTING_INTS))
    if k == 1:
        return helper.make_attribute(name, rng.choice(INTERESTING_FLOATS))
    if k == 2:
        return helper.make_attribute(name, rng.choice(INTERESTING_STRINGS))
    if k == 3:
        vals = [rng.choice(INTERESTING_INTS) for _ in range(rng.choice([0, 1, 2, 3, 4, 6]))]
        return helper.make_attribute(name, vals, attr_type=AttributeProto.INTS)
    if k == 4:
        return helper.make_attribute(name, [rng.choice(INTERESTING_FLOATS) for _ in range(rng.choice([1, 2, 3]))])
    return helper.make_attribute(name, numpy_helper.from_array(np.zeros(rng.choice([0, 1, 3]), np.float32)))


def m_attr_retype(rng: random.Random, c: Case) -> bool:
    nodes = [n for n in c.custom_nodes() if n.attribute]
    if not nodes:
        return False
    n = rng.choice(nodes)
    i = rng.randrange(len(n.attribute))
    name = n.attribute[i].name
    del n.attribute[i]
    n.attribute.append(_random_attr(rng, name))
    c.log.append(f"attr_retype {n.name}.{name}")
    return True


def m_attr_remove(rng: random.Random, c: Case) -> bool:
    nodes = [n for n in c.custom_nodes() if n.attribute]
    if not nodes:
        return False
    n = rng.choice(nodes)
    i = rng.randrange(len(n.attribute))
    c.log.append(f"attr_remove {n.name}.{n.attribute[i].name}")
    del n.attribute[i]
    return True


def m_attr_add(rng: random.Random, c: Case) -> bool:
    nodes = c.custom_nodes()
    if not nodes or not c.vocab:
        return False
    n = rng.choice(nodes)
    name = rng.choice(sorted(c.vocab))
    for i, a in enumerate(n.attribute):
        if a.name == name:
            del n.attribute[i]
            break
    if rng.random() < 0.5:
        a = copy.deepcopy(rng.choice(c.vocab[name]))
    else:
        a = _random_attr(rng, name)
    n.attribute.append(a)
    c.log.append(f"attr_add {n.name}.{name}")
    return True


# ---- initializers ------------------------------------------------------------------------------------------------


def _pick_init(rng: random.Random, c: Case) -> int | None:
    custom_in = {x for n in c.custom_nodes() for x in n.input}
    cands = [i for i, t in enumerate(c.model.graph.initializer) if t.name in custom_in]
    return rng.choice(cands) if cands else None


def _set_init(c: Case, i: int, a: np.ndarray) -> None:
    name = c.model.graph.initializer[i].name
    c.model.graph.initializer[i].CopyFrom(numpy_helper.from_array(a, name))


def m_init_values(rng: random.Random, c: Case) -> bool:
    i = _pick_init(rng, c)
    if i is None:
        return False
    a = numpy_helper.to_array(c.model.graph.initializer[i])
    if a.size == 1 and rng.random() < 0.6:
        v = rng.choice(BIT_WIDTHS + INTERESTING_FLOATS)
        with np.errstate(all="ignore"):
            b = np.array(v).astype(a.dtype, casting="unsafe").reshape(a.shape) if a.dtype.kind != "b" else a
    else:
        b = _extreme(rng, a)
    _set_init(c, i, b)
    c.log.append(f"init_values {c.model.graph.initializer[i].name}")
    return True


def m_init_dtype(rng: random.Random, c: Case) -> bool:
    i = _pick_init(rng, c)
    if i is None:
        return False
    a = numpy_helper.to_array(c.model.graph.initializer[i])
    t = NP_OF[rng.choice(DTYPES)]
    with np.errstate(all="ignore"):
        _set_init(c, i, a.astype(t))
    c.log.append(f"init_dtype {c.model.graph.initializer[i].name}->{np.dtype(t)}")
    return True


def _mutate_shape(rng: random.Random, shape: list[int]) -> list[int]:
    shape = list(shape)
    r = rng.random()
    if shape and r < 0.45:
        j = rng.randrange(len(shape))
        shape[j] = rng.choice([0, 1, 2, shape[j] + 1, max(0, shape[j] - 1), shape[j] * 2, 3, 7, 64, 513])
    elif r < 0.6 and shape:
        del shape[rng.randrange(len(shape))]
    elif r < 0.75:
        shape.insert(rng.randrange(len(shape) + 1), rng.choice([1, 2, 3]))
    elif r < 0.85:
        shape = []
    else:
        shape = [rng.choice([0, 1, 2, 5]) for _ in range(rng.choice([1, 2, 3, 4, 5, 6]))]
    return _cap(shape)


def m_init_shape(rng: random.Random, c: Case) -> bool:
    i = _pick_init(rng, c)
    if i is None:
        return False
    a = numpy_helper.to_array(c.model.graph.initializer[i])
    shape = _mutate_shape(rng, list(a.shape))
    b = np.resize(a, shape) if a.size and int(np.prod(shape)) else np.zeros(shape, a.dtype)
    _set_init(c, i, b.astype(a.dtype))
    c.log.append(f"init_shape {c.model.graph.initializer[i].name}->{shape}")
    return True


def m_init_to_input(rng: random.Random, c: Case) -> bool:
    """A constant becomes a graph input (the runtime path of ops that prepare constants at creation)."""
    i = _pick_init(rng, c)
    if i is None:
        return False
    t = c.model.graph.initializer[i]
    a = numpy_helper.to_array(t)
    c.model.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(a.shape)))
    c.feeds[t.name] = a
    del c.model.graph.initializer[i]
    c.log.append(f"init_to_input {t.name}")
    return True


# ---- graph inputs --------------------------------------------------------------------------------------------


def _graph_inputs(c: Case) -> list[onnx.ValueInfoProto]:
    return [v for v in c.model.graph.input if v.name in c.feeds]


def _redeclare(v: onnx.ValueInfoProto, a: np.ndarray, symbolic: bool) -> None:
    tt = v.type.tensor_type
    tt.elem_type = {np.dtype(t): k for k, t in NP_OF.items()}[a.dtype]
    tt.shape.Clear()
    for j, d in enumerate(a.shape):
        dim = tt.shape.dim.add()
        if symbolic:
            dim.dim_param = f"{v.name}_d{j}"
        else:
            dim.dim_value = d


def m_input_shape(rng: random.Random, c: Case) -> bool:
    ins = _graph_inputs(c)
    if not ins:
        return False
    v = rng.choice(ins)
    a = c.feeds[v.name]
    shape = _mutate_shape(rng, list(a.shape))
    b = np.resize(a, shape) if a.size and int(np.prod(shape)) else np.zeros(shape, a.dtype)
    c.feeds[v.name] = b.astype(a.dtype)
    _redeclare(v, c.feeds[v.name], symbolic=rng.random() < 0.5)
    c.log.append(f"input_shape {v.name}->{shape}")
    return True


def m_input_dtype(rng: random.Random, c: Case) -> bool:
    ins = _graph_inputs(c)
    if not ins:
        return False
    v = rng.choice(ins)
    t = NP_OF[rng.choice(DTYPES)]
    with np.errstate(all="ignore"):
        c.feeds[v.name] = c.feeds[v.name].astype(t)
    _redeclare(v, c.feeds[v.name], symbolic=rng.random() < 0.5)
    c.log.append(f"input_dtype {v.name}->{np.dtype(t)}")
    return True


def m_input_values(rng: random.Random, c: Case) -> bool:
    ins = _graph_inputs(c)
    if not ins:
        return False
    v = rng.choice(ins)
    a = c.feeds[v.name]
    if a.dtype.kind in "iu" and a.ndim == 1 and rng.random() < 0.7:  # LSTM/GRU lengths and iqPad pads
        flat = a.copy()
        for _ in range(rng.randint(1, max(1, a.size))):
            if a.size:
                flat[rng.randrange(a.size)] = rng.choice(
                    [-1, 0, 1, 2, 3, 5, 100, 65536, 2**31 - 1, -(2**31), 2**40, -(2**62)]
                )
        with np.errstate(all="ignore"):
            c.feeds[v.name] = flat.astype(a.dtype)
    else:
        c.feeds[v.name] = _extreme(rng, a)
    c.log.append(f"input_values {v.name}")
    return True


# ---- wiring, outputs, op ---------------------------------------------------------------------------------------


def m_node_inputs(rng: random.Random, c: Case) -> bool:
    nodes = c.custom_nodes()
    if not nodes:
        return False
    n = rng.choice(nodes)
    ins = list(n.input)
    r = rng.random()
    if ins and r < 0.3:
        ins = ins[:-1]
    elif ins and r < 0.5:
        ins[rng.randrange(len(ins))] = ""
    elif ins and r < 0.75:
        ins.append(rng.choice(ins))
    elif len(ins) >= 2:
        i, j = rng.sample(range(len(ins)), 2)
        ins[i], ins[j] = ins[j], ins[i]
    else:
        return False
    del n.input[:]
    n.input.extend(ins)
    c.log.append(f"node_inputs {n.name}->{ins}")
    return True


def m_output_type(rng: random.Random, c: Case) -> bool:
    outs = list(c.model.graph.output)
    if not outs:
        return False
    o = rng.choice(outs)
    if rng.random() < 0.4:
        o.ClearField("type")  # untyped graph output
        c.log.append(f"output_untyped {o.name}")
    else:
        o.type.tensor_type.elem_type = rng.choice(DTYPES)
        c.log.append(f"output_type {o.name}->{o.type.tensor_type.elem_type}")
    return True


def m_op_swap(rng: random.Random, c: Case) -> bool:
    nodes = c.custom_nodes()
    if not nodes:
        return False
    n = rng.choice(nodes)
    cands = c.ops.get(n.domain, [])
    if not cands:
        return False
    n.op_type = rng.choice(cands)
    c.log.append(f"op_swap {n.name}->{n.op_type}")
    return True


MUTATIONS: list[tuple[Callable[[random.Random, Case], bool], int]] = [
    (m_attr_int, 10),
    (m_attr_ints, 10),
    (m_attr_float, 8),
    (m_attr_string, 4),
    (m_attr_retype, 3),
    (m_attr_remove, 3),
    (m_attr_add, 6),
    (m_init_values, 10),
    (m_init_dtype, 3),
    (m_init_shape, 5),
    (m_init_to_input, 3),
    (m_input_shape, 10),
    (m_input_dtype, 3),
    (m_input_values, 8),
    (m_node_inputs, 3),
    (m_output_type, 3),
    (m_op_swap, 3),
]


def mutate(rng: random.Random, c: Case) -> Case:
    """Applies 1 to 3 mutations (retrying mutations that do not apply to this model)."""
    funcs = [f for f, _ in MUTATIONS]
    weights = [w for _, w in MUTATIONS]
    want = rng.choice([1, 1, 1, 2, 2, 3])
    done = tries = 0
    while done < want and tries < 20:
        tries += 1
        f = rng.choices(funcs, weights)[0]
        try:
            applied = f(rng, c)
        except (ValueError, TypeError, OverflowError) as e:  # a mutation numpy/protobuf cannot express
            c.log.append(f"{f.__name__} not applicable: {e!r}"[:200])
            applied = False
        if applied:
            done += 1
    return c
