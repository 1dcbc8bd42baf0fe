"""The Python-layer fuzz target: mutated real-world models through ``ortquant.prepare_model`` in default and
``integer=True`` mode, each case in a forked child (fuzz_harness.run_forked: memory cap, timeout).

Seeds: published QONNX/FINN/hls4ml/thinker models from ``../shared/conformance/realworld`` (as users pass them,
with their sample input), the repository's ``models/`` networks and the linger int8 MaxPool/Relu exports of
``tests/data/linger`` (the int8 rewrites). Mutations reach every node, standard ones included (the transforms read
Conv/Gemm/MatMul/BatchNormalization/MaxPool attributes too): attribute types (INT <-> FLOAT <-> STRING <-> INTS,
empty INTS, non-UTF-8 strings), attribute values (NaN/inf, 0, negative, huge), inputs dropped / emptied / added,
outputs added, initializer dims changed without their data (raw data too short or too long), raw data truncated,
element types changed (data reinterpreted or converted), values (NaN/inf/0 bit widths and zero points), shapes
(a parameter of shape (4,), a bias of shape (N, 1), empty and 1-D weights), graph-input ranks (1-D and 3-D
activations, fed accordingly) and node domains.

Per case, the child runs for each mode: ``prepare_model`` -> onnxruntime session (ortquant's ops registered) ->
one run on the sample input. Classes:

- ``ok``: both modes ran; ``refused``: both refused (at any stage) with an accepted error: ``ModelError`` or one
  of onnxruntime's own exception types (its session/run errors, which name the node);
  ``integer_stricter``: the integer mode refused what the default mode ran (allowed: integer mode may reject a
  layer its engine cannot run);
- failures: ``escape`` (any other exception left ortquant: a bare ValueError, IndexError, TypeError, KeyError,
  OverflowError, UnicodeDecodeError, protobuf DecodeError, onnx's own errors ...), ``disagree`` (integer mode ran
  where the default mode refused, or both ran and gave outputs of other names, element types or shapes), and the
  harness's ``signal``/``hang``/``sanitizer``/``harness``.

onnx's checker and shape-inference errors are not accepted: a transform that calls onnx must turn its errors into a
``ModelError`` naming the file or node.

CLI: python tests/fuzz/fuzz_python.py --cases N [--seed S] [--jobs J] [--out report.json]. Exit status 1 when a
case is in a failure class.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import random
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_harness as fh
import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[2]
REALWORLD = REPO.parent / "shared" / "conformance" / "realworld"
BAD = ("escape", "disagree", "signal", "hang", "sanitizer", "harness")

# Small real-world models covering every transform: QONNX Conv/Gemm/MatMul layers (+ BatchNormalization, MaxPool,
# Flatten, Reshape) for the integer lowering, channels_last ops, legacy domains (finn, onnx.brevitas, Quant in
# the default domain), MultiThreshold/XNOR FINN graphs, FloatQuant, thinker.
REALWORLD_SEEDS = (
    "exm_bnn_fc_1layer",
    "exm_separable_conv_ch_last",
    "exm_branched_model_ch_last",
    "qonnx_eltwise_chanlast",
    "qonnx_floatquant_fp8",
    "qkt_qactivation_0",
    "qkt_qconv2d_0",
    "qkt_qconv2d_11",
    "qkt_qdense_1",
    "qkt_qdense2_4",
    "qkt_qdense2_0",  # its second layer on three byte planes (an 18-bit grid)
    "qkt_qconv2d_conversion",
    "zoo_qkeras_jettagging",
    "zoo_unsw_nb15_mlp_w2a2",
    "zoo_tfc_1w2a",
    "zoo_tfc_2w2a_dom",
    "finn_mixed_model_mt_only",
    "finn_mixed_model_cntk",
    "labs_gtsrb12_w2a3",
    "labs_gtsrb12_streamlined",
    "labs_tfc_w1a1_streamlined_xnor",
    "qonnx_espcn_subpixel_w4a4",
    "qonnx2mdc_mnist",
    "radioml_vgg10_w8a8",
    "thinker_resnet50_fashion_mnist",
)
LINGER_SEEDS = ("maxpool_int8", "maxpool_int8_ceil", "relu_int8")

Seed = tuple[str, bytes, dict[str, np.ndarray]]


def load_seeds() -> list[Seed]:
    """(name, model bytes, feeds) per seed, in a fixed order. Missing real-world files are left out (the corpus
    lives outside the repository); the repository's own models are always there."""
    seeds: list[Seed] = []
    for name in REALWORLD_SEEDS:
        f = REALWORLD / f"{name}.onnx"
        if not f.exists():
            continue
        d = np.load(f.with_suffix(".npz"))
        feeds = {k[3:]: np.asarray(d[k]) for k in d.files if k.startswith("in:")}
        seeds.append((f"rw_{name}", f.read_bytes(), feeds))
    for f in sorted((REPO / "models").glob("*.onnx")):
        m = onnx.load(str(f))
        inits = {i.name for i in m.graph.initializer}
        feeds = {}
        for vi in m.graph.input:
            if vi.name in inits:
                continue
            dims = [d.dim_value if d.HasField("dim_value") else 2 for d in vi.type.tensor_type.shape.dim]
            dt = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
            feeds[vi.name] = (np.random.default_rng(0).standard_normal(dims) * 0.5).astype(dt)
        seeds.append((f"models_{f.stem}", f.read_bytes(), feeds))
    for stem in LINGER_SEEDS:
        f = REPO / "tests" / "data" / "linger" / f"{stem}.onnx"
        m = onnx.load(str(f))
        d = np.load(f.with_suffix(".npz"))
        keys = sorted((k for k in d.files if k.startswith("x") and k[1:].isdigit()), key=lambda k: int(k[1:]))
        inits = {i.name for i in m.graph.initializer}
        names = [i.name for i in m.graph.input if i.name not in inits]
        feeds = {n: np.asarray(d[k]) for n, k in zip(names, keys, strict=False)}
        seeds.append((f"linger_{stem}", f.read_bytes(), feeds))
    return seeds


# ---- mutations ----------------------------------------------------------------------------------------------

INTS = [0, 1, -1, 2, 3, 4, 8, 9, 33, 64, 65, 255, 1 << 31, (1 << 63) - 1, -(1 << 63)]
FLOATS = [math.nan, math.inf, -math.inf, 0.0, -0.0, -1.0, 1.0, 0.5, 2.0, 1e-45, 3.4e38, 2.0**63, 4.5]
STRINGS = [b"", b"\xff\xfe", b"abc\x80", b"\xc3\x28", b"ROUND", b"FLOOR", b"HALF_UP", b"NOTSET", b"SAME_UPPER",
           b"VALID", b"NEAREST", b"x" * 300]  # fmt: skip
ATTR_NAMES = ["epsilon", "alpha", "beta", "signed", "narrow", "rounding_mode", "kernel_shape", "strides", "pads",
              "dilations", "group", "transA", "transB", "auto_pad", "training_mode", "ceil_mode", "axis",
              "spatial", "storage_order", "momentum"]  # fmt: skip
DTYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.INT8, TensorProto.UINT8,
          TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL, TensorProto.STRING, 0, 999]  # fmt: skip
BIT_WIDTHS = [0.0, 1.0, 2.0, 8.0, 9.0, 33.0, 65.0, -1.0, 1.5, math.nan, math.inf]


class Case:
    def __init__(self, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
        self.model = model
        self.feeds = {k: np.array(v) for k, v in feeds.items()}
        self.log: list[str] = []


def _label(n: onnx.NodeProto) -> str:
    return n.name or (n.output[0] if n.output else "?")


def _random_attr(rng: random.Random, name: str) -> AttributeProto:
    k = rng.randrange(7)
    if k == 0:
        return helper.make_attribute(name, rng.choice(INTS))
    if k == 1:
        return helper.make_attribute(name, rng.choice(FLOATS))
    if k == 2:
        return helper.make_attribute(name, rng.choice(STRINGS))
    if k == 3:
        vals = [rng.choice(INTS) for _ in range(rng.choice([1, 2, 3, 4, 6]))]
        return helper.make_attribute(name, vals, attr_type=AttributeProto.INTS)
    if k == 4:  # an empty list of ints
        a = AttributeProto()
        a.name, a.type = name, AttributeProto.INTS
        return a
    if k == 5:
        return helper.make_attribute(name, [rng.choice(FLOATS) for _ in range(rng.choice([1, 2]))])
    return helper.make_attribute(name, [rng.choice(STRINGS)])


def m_attr_retype(rng: random.Random, c: Case) -> bool:
    nodes = [n for n in c.model.graph.node if n.attribute]
    if not nodes:
        return False
    n = rng.choice(nodes)
    i = rng.randrange(len(n.attribute))
    name = n.attribute[i].name
    del n.attribute[i]
    n.attribute.append(_random_attr(rng, name))
    c.log.append(f"attr_retype {_label(n)}.{name}->{n.attribute[-1].type}")
    return True


def m_attr_value(rng: random.Random, c: Case) -> bool:
    cands = [(n, a) for n in c.model.graph.node for a in n.attribute]
    if not cands:
        return False
    n, a = rng.choice(cands)
    if a.type == AttributeProto.INT:
        a.i = rng.choice(INTS)
    elif a.type == AttributeProto.FLOAT:
        a.f = rng.choice(FLOATS)
    elif a.type == AttributeProto.STRING:
        a.s = rng.choice(STRINGS)
    elif a.type == AttributeProto.INTS:
        vals = list(a.ints)
        r = rng.random()
        if r < 0.3:
            vals = []
        elif r < 0.5 and vals:
            vals = vals[:-1]
        elif r < 0.7:
            vals.append(rng.choice(INTS))
        elif vals:
            vals[rng.randrange(len(vals))] = rng.choice(INTS)
        del a.ints[:]
        a.ints.extend(vals)
    else:
        return False
    c.log.append(f"attr_value {_label(n)}.{a.name}")
    return True


def m_attr_add(rng: random.Random, c: Case) -> bool:
    if not c.model.graph.node:
        return False
    n = rng.choice(list(c.model.graph.node))
    name = rng.choice(ATTR_NAMES)
    kept = [a for a in n.attribute if a.name != name]
    del n.attribute[:]
    n.attribute.extend(kept)
    n.attribute.append(_random_attr(rng, name))
    c.log.append(f"attr_add {_label(n)}.{name}")
    return True


def m_attr_remove(rng: random.Random, c: Case) -> bool:
    nodes = [n for n in c.model.graph.node if n.attribute]
    if not nodes:
        return False
    n = rng.choice(nodes)
    i = rng.randrange(len(n.attribute))
    c.log.append(f"attr_remove {_label(n)}.{n.attribute[i].name}")
    del n.attribute[i]
    return True


def m_node_inputs(rng: random.Random, c: Case) -> bool:
    if not c.model.graph.node:
        return False
    n = rng.choice(list(c.model.graph.node))
    ins = list(n.input)
    r = rng.random()
    if ins and r < 0.35:
        ins = ins[: rng.randrange(len(ins))]
    elif ins and r < 0.55:
        ins[rng.randrange(len(ins))] = ""
    elif ins and r < 0.8:
        ins.append(rng.choice(ins))
    elif len(ins) >= 2:
        i, j = rng.sample(range(len(ins)), 2)
        ins[i], ins[j] = ins[j], ins[i]
    else:
        return False
    del n.input[:]
    n.input.extend(ins)
    c.log.append(f"node_inputs {_label(n)}->{len(ins)}")
    return True


def m_node_outputs(rng: random.Random, c: Case) -> bool:
    if not c.model.graph.node:
        return False
    n = rng.choice(list(c.model.graph.node))
    if rng.random() < 0.5:
        n.output.append(f"{_label(n)}__extra")
    elif n.output:
        n.output[0] = ""
    c.log.append(f"node_outputs {_label(n)}->{list(n.output)}")
    return True


def m_node_domain(rng: random.Random, c: Case) -> bool:
    if not c.model.graph.node:
        return False
    n = rng.choice(list(c.model.graph.node))
    n.domain = rng.choice(["", "qonnx.custom_op.general", "finn", "qonnx.custom_op.channels_last", "thinker", "x"])
    c.log.append(f"node_domain {_label(n)}->{n.domain}")
    return True


def m_node_name(rng: random.Random, c: Case) -> bool:
    if not c.model.graph.node:
        return False
    n = rng.choice(list(c.model.graph.node))
    n.name = ""
    c.log.append(f"node_unnamed {n.output[0] if n.output else ''}")
    return True


def _pick_init(rng: random.Random, c: Case) -> TensorProto | None:
    inits = list(c.model.graph.initializer)
    return rng.choice(inits) if inits else None


def m_init_truncate(rng: random.Random, c: Case) -> bool:
    t = _pick_init(rng, c)
    if t is None:
        return False
    try:
        a = numpy_helper.to_array(t)
    except Exception:
        return False
    t.CopyFrom(numpy_helper.from_array(a, t.name))  # raw_data form
    raw = t.raw_data
    if rng.random() < 0.7 and raw:
        t.raw_data = raw[: rng.randrange(len(raw))]
    else:
        t.raw_data = raw + b"\x00" * rng.choice([1, 3, 4, 8])
    c.log.append(f"init_truncate {t.name} {len(raw)}->{len(t.raw_data)}")
    return True


def m_init_dims(rng: random.Random, c: Case) -> bool:
    """Dims changed, data kept: the data no longer fits (or does, when the count is the same)."""
    t = _pick_init(rng, c)
    if t is None:
        return False
    dims = list(t.dims)
    r = rng.random()
    if dims and r < 0.4:
        dims[rng.randrange(len(dims))] = rng.choice([0, 1, 2, dims[0] + 1, -1])
    elif r < 0.6:
        dims = dims[1:]
    elif r < 0.8:
        dims = [*dims, 1]
    else:
        dims = [rng.choice([0, 4, 1 << 40])]
    del t.dims[:]
    t.dims.extend(dims)
    c.log.append(f"init_dims {t.name}->{dims}")
    return True


def m_init_dtype(rng: random.Random, c: Case) -> bool:
    t = _pick_init(rng, c)
    if t is None:
        return False
    dt = rng.choice(DTYPES)
    if rng.random() < 0.5 and dt not in (0, 999, TensorProto.STRING):
        try:
            a = numpy_helper.to_array(t)
            with np.errstate(all="ignore"):
                t.CopyFrom(numpy_helper.from_array(a.astype(helper.tensor_dtype_to_np_dtype(dt)), t.name))
        except Exception:
            return False
        c.log.append(f"init_astype {t.name}->{dt}")
    else:
        t.data_type = dt  # the data reinterpreted (or not decodable at all)
        c.log.append(f"init_retype {t.name}->{dt}")
    return True


def m_init_values(rng: random.Random, c: Case) -> bool:
    t = _pick_init(rng, c)
    if t is None:
        return False
    try:
        a = numpy_helper.to_array(t).copy()
    except Exception:
        return False
    if a.size == 0 or a.dtype.kind not in "fiu":
        return False
    flat = a.reshape(-1)
    v = rng.choice(BIT_WIDTHS + FLOATS)
    with np.errstate(all="ignore"):
        if rng.random() < 0.5 or a.size == 1:
            flat[:] = np.array(v).astype(a.dtype)
        else:
            flat[rng.randrange(a.size)] = np.array(v).astype(a.dtype)
    t.CopyFrom(numpy_helper.from_array(flat.reshape(a.shape), t.name))
    c.log.append(f"init_values {t.name}={v}")
    return True


def m_init_shape(rng: random.Random, c: Case) -> bool:
    """A new shape with data to match: per-tensor parameters become (4,), biases (N, 1), weights empty or 1-D."""
    t = _pick_init(rng, c)
    if t is None:
        return False
    try:
        a = numpy_helper.to_array(t)
    except Exception:
        return False
    if a.dtype.kind not in "fiub":
        return False
    r = rng.random()
    if r < 0.25:
        shape = [4]
    elif r < 0.45:
        shape = [*a.shape, 1] if a.ndim else [1, 1]
    elif r < 0.6:
        shape = [0, *a.shape[1:]] if a.ndim else [0]
    elif r < 0.75:
        shape = [int(a.size)]
    elif r < 0.9 and a.ndim >= 2:
        shape = [a.shape[0], 0, *a.shape[2:]]
    else:
        shape = [1] * rng.choice([1, 3, 5])
    if math.prod(shape) > (1 << 20):
        return False
    b = np.resize(a, shape) if a.size and math.prod(shape) else np.zeros(shape, a.dtype)
    t.CopyFrom(numpy_helper.from_array(b.astype(a.dtype), t.name))
    c.log.append(f"init_shape {t.name}->{shape}")
    return True


def m_init_external(rng: random.Random, c: Case) -> bool:
    """An initializer that claims external data (a file that is not there, or outside the model's folder)."""
    t = _pick_init(rng, c)
    if t is None:
        return False
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    del t.external_data[:]
    e = t.external_data.add()
    e.key, e.value = "location", rng.choice(["../../etc/passwd", "missing.bin", "/tmp/x"])
    c.log.append(f"init_external {t.name}")
    return True


def m_input_rank(rng: random.Random, c: Case) -> bool:
    """A graph input of another rank (1-D, 3-D ...), declared and fed so."""
    inits = {t.name for t in c.model.graph.initializer}
    ins = [v for v in c.model.graph.input if v.name not in inits and v.name in c.feeds]
    if not ins:
        return False
    v = rng.choice(ins)
    a = c.feeds[v.name]
    r = rng.random()
    if r < 0.3:
        shape = [int(a.size)]
    elif r < 0.6:
        shape = [2, *a.shape]
    elif r < 0.8 and a.ndim >= 2:
        shape = [int(a.shape[0]), int(a.size // max(a.shape[0], 1))] if a.shape[0] else [0]
    else:
        shape = [*a.shape[:-1], 1] if a.ndim else [1]
    if math.prod(shape) > (1 << 20):
        return False
    b = np.resize(a, shape) if a.size and math.prod(shape) else np.zeros(shape, a.dtype)
    c.feeds[v.name] = b.astype(a.dtype)
    tt = v.type.tensor_type
    tt.shape.Clear()
    for d in shape:
        tt.shape.dim.add().dim_value = d
    c.log.append(f"input_rank {v.name}->{shape}")
    return True


MUTATIONS: list[tuple[Callable[[random.Random, Case], bool], int]] = [
    (m_attr_retype, 8),
    (m_attr_value, 10),
    (m_attr_add, 6),
    (m_attr_remove, 4),
    (m_node_inputs, 6),
    (m_node_outputs, 2),
    (m_node_domain, 2),
    (m_node_name, 2),
    (m_init_truncate, 5),
    (m_init_dims, 5),
    (m_init_dtype, 4),
    (m_init_values, 8),
    (m_init_shape, 8),
    (m_init_external, 1),
    (m_input_rank, 5),
]


def mutate(rng: random.Random, c: Case) -> None:
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


# ---- the child --------------------------------------------------------------------------------------------------


def _accepted_errors() -> tuple[type[BaseException], ...]:
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    from ortquant.transforms import ModelError

    names = ("Fail", "InvalidArgument", "NoSuchFile", "NoModel", "EngineError", "RuntimeException",
             "InvalidProtobuf", "ModelLoaded", "NotImplemented", "InvalidGraph", "EPFail")  # fmt: skip
    return (ModelError, *(getattr(st, n) for n in names if hasattr(st, n)))


def _where(e: BaseException) -> str:
    """The innermost frame of ortquant's own code in the traceback (where the exception escaped from)."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "/ortquant/" in f.filename]
    f = frames[-1] if frames else traceback.extract_tb(e.__traceback__)[-1]
    return f"{Path(f.filename).name}:{f.lineno} ({f.name})"


def _one_mode(model_bytes: bytes, feeds: dict[str, np.ndarray], integer: bool) -> tuple[str, str]:
    """('ran', output signature) | ('refused', message) | ('escape', description)."""
    import onnxruntime as ort

    import ortquant

    accepted = _accepted_errors()
    stage = "prepare_model"
    try:
        proto = ortquant.prepare_model(model_bytes, integer=integer)
        stage = "session"
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 4
        ortquant.register(so)
        sess = ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        stage = "run"
        names = {i.name for i in sess.get_inputs()}
        outs = sess.run(None, {k: v for k, v in feeds.items() if k in names})
        sig = [(o.name, str(v.dtype), list(v.shape)) for o, v in zip(sess.get_outputs(), outs, strict=True)]
        return "ran", json.dumps(sig)
    except accepted as e:
        return "refused", f"{stage}: {type(e).__name__}: {str(e)[:300]}"
    except MemoryError as e:
        return "refused", f"{stage}: MemoryError {e!r}"[:300]
    except Exception as e:
        in_ortquant = any("/ortquant/" in f.filename for f in traceback.extract_tb(e.__traceback__))
        if stage != "prepare_model" and not in_ortquant:  # onnxruntime's Python wrapper (e.g. a feed it refuses)
            return "refused", f"{stage}: {type(e).__name__}: {str(e)[:300]}"
        return "escape", f"{'integer' if integer else 'default'} {stage}: {type(e).__name__} at {_where(e)}: {e}"[:600]


def _child(model_bytes: bytes, feeds_blob: bytes) -> tuple[str, str]:
    feeds = dict(np.load(io.BytesIO(feeds_blob), allow_pickle=False))
    d_cls, d_detail = _one_mode(model_bytes, feeds, integer=False)
    if d_cls == "escape":
        return "escape", d_detail
    i_cls, i_detail = _one_mode(model_bytes, feeds, integer=True)
    if i_cls == "escape":
        return "escape", i_detail
    if d_cls == "ran" and i_cls == "ran":
        if d_detail != i_detail:
            return "disagree", f"outputs differ: default {d_detail[:250]} integer {i_detail[:250]}"
        return "ok", ""
    if d_cls == "refused" and i_cls == "ran":
        return "disagree", f"integer ran ({i_detail[:200]}) where default refused: {d_detail}"
    if d_cls == "ran":
        return "integer_stricter", i_detail
    return "refused", d_detail


# ---- campaign -----------------------------------------------------------------------------------------------


def _preload() -> None:
    """Do once, here, what every child would do first: import ortquant's modules, map the library, and register
    ortquant's ONNX schemas (0.2-0.3 s per child otherwise, more than a case's own work; the transforms that need
    the schemas register them themselves, which is tested in tests/transforms). No onnxruntime session is created
    here (fuzz_harness: a child forked from a process that ran sessions can inherit a held lock)."""
    import ctypes

    import ortquant
    import ortquant.schemas
    import ortquant.transforms.fold_weight_quantizers
    import ortquant.transforms.lower_integer

    ctypes.CDLL(ortquant.library_path())  # mapped once: the children's registration finds it loaded
    ortquant.schemas.register_schemas()


def run_campaign(
    n_cases: int, seed: int = 0, jobs: int = 1, timeout: float = 60.0, mem_gib: float = 6.0, progress: bool = False,
    partial_out: str | None = None, seeds_only: bool = False,
) -> list[fh.Outcome]:  # fmt: skip
    seeds = load_seeds()
    _preload()
    rng = random.Random(seed)
    if seeds_only:
        n_cases = len(seeds)

    def cases() -> Iterator[tuple[str, tuple, list[str]] | fh.Outcome]:
        for i in range(n_cases):
            name, blob, feeds = seeds[i] if seeds_only else seeds[rng.randrange(len(seeds))]
            c = Case(onnx.load_from_string(blob), feeds)
            if not seeds_only:
                mutate(rng, c)
            try:
                mblob = c.model.SerializeToString()
                fblob = fh.serialize_feeds(c.feeds)
            except Exception as e:
                yield fh.Outcome(i, name, "skipped", repr(e)[:200], c.log)
                continue
            yield name, (mblob, fblob), c.log

    mem = int(mem_gib * (1 << 30))
    return fh.run_forked(cases(), n_cases, _child, jobs, timeout, mem, progress, partial_out, every=100, bad=BAD)


def summarize(outcomes: list[fh.Outcome]) -> dict:
    return fh.summarize(outcomes, BAD)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--mem-gib", type=float, default=6.0)
    ap.add_argument("--out", default=None, help="write the JSON report here")
    ap.add_argument("--seeds-only", action="store_true", help="run the unmutated seeds (--cases is ignored)")
    ap.add_argument("--outcomes", action="store_true", help="list every case's outcome in the report")
    ap.add_argument("--quiet", action="store_true", help="no progress lines")
    a = ap.parse_args()
    t0 = time.time()
    res = run_campaign(a.cases, a.seed, a.jobs, a.timeout, a.mem_gib, not a.quiet, a.out, a.seeds_only)
    rep = summarize(res)
    if a.outcomes:
        rep["outcomes"] = [{"index": o.index, "seed": o.seed, "class": o.cls, "detail": o.detail} for o in res]
    rep["seconds"] = round(time.time() - t0, 1)
    rep["seed"] = a.seed
    text = json.dumps(rep, indent=1, default=str)
    if a.out:
        Path(a.out).write_text(text)
    print(json.dumps({k: rep[k] for k in ("cases", "classes", "seconds")}))
    for b in rep["bad"][:20]:
        print(json.dumps(b, default=str)[:2000])
    return 1 if rep["bad"] else 0


if __name__ == "__main__":
    sys.exit(main())
