"""oneDNN's C API through ctypes: primitives created once, executed directly.

Why: torch reaches oneDNN only through per-call ops (`mkldnn._convolution_pointwise`, `_linear_pointwise`) that
create the primitive descriptor on every call — 25–110 µs a call on this project's 2-core machine (8→8 1×1 at 1²:
33 µs through torch against 6 µs here; 64→64 1×1 at 56²: 118 against 87 µs). Here a primitive is created once per
(layer, input shape) and each call is two `dnnl_memory_set_data_handle` and one `dnnl_primitive_execute`.

The library is Intel's oneDNN as a wheel (`onednn-cpu-gomp`, oneDNN 3.x built on GNU OpenMP): it loads beside
torch's own copy (torch exports none of its dnnl_ symbols) and binds the libgomp.so.1 torch already loaded, so
`torch.set_num_threads` sets its thread count too. Nothing here is generated or read from an engine file: the
primitives are made from a layer's shapes and attributes (data) through the library's fixed C entry points.

    find_library()         path of libdnnl.so.3: $TENSORFORGE_ONEDNN_LIB, else <sys.prefix>/lib, else the linker's
    library() -> Lib|None  the loaded library (None, with `unavailable_reason()` saying why)
    Lib.md(shape, strides) a float32 memory descriptor with explicit strides; Lib.md_any(shape): format chosen by
                           the primitive (weights)
    Primitive              a created primitive, its descriptor's queries, and an execute over (arg id, pointer)
                           pairs; freed with its owner (weakref.finalize)
    PostOps                a primitive attribute with post-ops in order (an ONNX activation, the residual add,
                           PRelu), the execute arguments they add and which operand each takes
    WeightedPrimitive      src · weights [+ bias] → dst with post-ops (convolution, matmul), its packed weight
    PrimitiveTable         a kernel's primitives per key, made on first use
    packed_weight(...)     a weight reordered into a primitive's layout once per (weight tensor, layout);
                           PackedSlot / LastDerived keep the last tensor seen and what was made from it
"""

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading
import weakref

import torch
from torch.utils.weak import WeakIdKeyDictionary

# enum values of oneDNN 3.x's C API (dnnl_types.h, dnnl_common_types.h, dnnl_config.h)
CPU_ENGINE, IN_ORDER_STREAM, F32, TAG_ANY, FORWARD_INFERENCE = 1, 1, 3, 1, 96
CONV_DIRECT = 1
QUERY_SRC_MD, QUERY_WEIGHTS_MD, QUERY_DST_MD, QUERY_IMPL_INFO = 129, 131, 133, 8
ARG_SRC, ARG_SRC_1, ARG_DST, ARG_WEIGHTS, ARG_BIAS = 1, 2, 17, 33, 41
POST_OP_ARG_BASE = 32768                     # DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) = BASE · (i + 1)
BINARY_ADD = 131056
POOLING_MAX = 511
RUNTIME_OMP = 2
ELTWISE = {"relu": 32, "tanh": 33, "elu": 34, "linear": 38, "soft_relu": 39, "hardsigmoid": 40, "logistic": 41,
           "gelu_tanh": 43, "swish": 44, "clip_v2": 47, "gelu_erf": 49, "mish": 51, "hardswish": 52}
STATUS = {1: "out of memory", 2: "invalid arguments", 3: "unimplemented", 4: "no implementation fits",
          5: "runtime error", 6: "not required"}
WHEEL = "onednn-cpu-gomp==2023.2.0"
# RNN primitives (dnnl_types.h): direction, the execute arguments beyond SRC/WEIGHTS/DST (= *_LAYER), and the query
# of an execute argument's memory descriptor (index: the argument id)
RNN_DIRECTION = {"forward": 1, "reverse": 2, "bidirectional": 3}   # left2right, right2left, bidirectional_concat
ARG_SRC_ITER, ARG_SRC_ITER_C, ARG_DST_ITER, ARG_DST_ITER_C = 2, 3, 18, 19
ARG_WEIGHTS_ITER, ARG_WEIGHTS_PEEPHOLE = 34, 35
QUERY_EXEC_ARG_MD = 255

_vp = ctypes.c_void_p
_P = ctypes.POINTER(_vp)
Dims = ctypes.c_int64 * 12


class ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", _vp)]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]


class OneDnnError(RuntimeError):
    pass


_SIGNATURES = {   # name: (restype, argtypes)
    "dnnl_version": (ctypes.POINTER(_Version), []),
    "dnnl_engine_create": (ctypes.c_int, [_P, ctypes.c_int, ctypes.c_size_t]),
    "dnnl_stream_create": (ctypes.c_int, [_P, _vp, ctypes.c_uint]),
    "dnnl_memory_desc_create_with_strides": (ctypes.c_int, [_P, ctypes.c_int, Dims, ctypes.c_int, Dims]),
    "dnnl_memory_desc_create_with_tag": (ctypes.c_int, [_P, ctypes.c_int, Dims, ctypes.c_int, ctypes.c_int]),
    "dnnl_memory_desc_destroy": (ctypes.c_int, [_vp]),
    "dnnl_memory_desc_get_size": (ctypes.c_size_t, [_vp]),
    "dnnl_memory_desc_equal": (ctypes.c_int, [_vp, _vp]),
    "dnnl_memory_create": (ctypes.c_int, [_P, _vp, _vp, _vp]),
    "dnnl_memory_destroy": (ctypes.c_int, [_vp]),
    "dnnl_memory_set_data_handle": (ctypes.c_int, [_vp, _vp]),
    "dnnl_primitive_attr_create": (ctypes.c_int, [_P]),
    "dnnl_primitive_attr_destroy": (ctypes.c_int, [_vp]),
    "dnnl_primitive_attr_set_post_ops": (ctypes.c_int, [_vp, _vp]),
    "dnnl_post_ops_create": (ctypes.c_int, [_P]),
    "dnnl_post_ops_destroy": (ctypes.c_int, [_vp]),
    "dnnl_post_ops_append_eltwise": (ctypes.c_int, [_vp, ctypes.c_int, ctypes.c_float, ctypes.c_float]),
    "dnnl_post_ops_append_binary": (ctypes.c_int, [_vp, ctypes.c_int, _vp]),
    "dnnl_post_ops_append_prelu": (ctypes.c_int, [_vp, ctypes.c_int]),
    "dnnl_convolution_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _vp, ctypes.c_int, ctypes.c_int, _vp, _vp, _vp, _vp, Dims, Dims, Dims, Dims, _vp]),
    "dnnl_matmul_primitive_desc_create": (ctypes.c_int, [_P, _vp, _vp, _vp, _vp, _vp, _vp]),
    "dnnl_lbr_gru_forward_primitive_desc_create": (ctypes.c_int, [_P, _vp, ctypes.c_int, ctypes.c_int] + [_vp] * 7
                                                   + [ctypes.c_uint, _vp]),
    "dnnl_gru_forward_primitive_desc_create": (ctypes.c_int, [_P, _vp, ctypes.c_int, ctypes.c_int] + [_vp] * 7
                                               + [ctypes.c_uint, _vp]),
    "dnnl_lstm_forward_primitive_desc_create": (ctypes.c_int, [_P, _vp, ctypes.c_int, ctypes.c_int] + [_vp] * 11
                                                + [ctypes.c_uint, _vp]),
    "dnnl_pooling_forward_primitive_desc_create": (
        ctypes.c_int, [_P, _vp, ctypes.c_int, ctypes.c_int, _vp, _vp, Dims, Dims, Dims, Dims, Dims, _vp]),
    "dnnl_reorder_primitive_desc_create": (ctypes.c_int, [_P, _vp, _vp, _vp, _vp, _vp]),
    "dnnl_primitive_desc_query": (ctypes.c_int, [_vp, ctypes.c_int, ctypes.c_int, _vp]),
    "dnnl_primitive_desc_query_md": (_vp, [_vp, ctypes.c_int, ctypes.c_int]),
    "dnnl_primitive_desc_destroy": (ctypes.c_int, [_vp]),
    "dnnl_primitive_create": (ctypes.c_int, [_P, _vp]),
    "dnnl_primitive_destroy": (ctypes.c_int, [_vp]),
    "dnnl_primitive_execute": (ctypes.c_int, [_vp, _vp, ctypes.c_int, _vp]),
    "dnnl_stream_wait": (ctypes.c_int, [_vp]),
}


def find_library() -> str | None:
    """Where libdnnl.so.3 is: $TENSORFORGE_ONEDNN_LIB, the environment's lib/ (where the wheel puts it), or the
    system linker's search."""
    explicit = os.environ.get("TENSORFORGE_ONEDNN_LIB")
    if explicit:
        return explicit
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix]):
        path = os.path.join(prefix, "lib", "libdnnl.so.3")
        if os.path.exists(path):
            return path
    return ctypes.util.find_library("dnnl")


class Lib:
    """The loaded library: its functions with their C signatures, one CPU engine and one in-order stream."""

    def __init__(self, path: str):
        self.path = path
        self.c = ctypes.CDLL(path)
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(self.c, name)
            fn.restype, fn.argtypes = res, args
        v = self.c.dnnl_version().contents
        self.version = (v.major, v.minor, v.patch)
        if v.major != 3 or v.cpu_runtime != RUNTIME_OMP:
            raise OneDnnError(f"{path} is oneDNN {v.major}.{v.minor} with CPU runtime {v.cpu_runtime}: tensorforge "
                              f"needs oneDNN 3.x on OpenMP (pip install {WHEEL})")
        self.engine, self.stream = _vp(), _vp()
        self.check(self.c.dnnl_engine_create(ctypes.byref(self.engine), CPU_ENGINE, 0), "engine")
        self.check(self.c.dnnl_stream_create(ctypes.byref(self.stream), self.engine, IN_ORDER_STREAM), "stream")

    @staticmethod
    def check(status: int, what: str) -> None:
        if status != 0:
            raise OneDnnError(f"oneDNN {what}: {STATUS.get(status, f'status {status}')}")

    def md(self, shape, strides) -> "Desc":
        h = _vp()
        self.check(self.c.dnnl_memory_desc_create_with_strides(ctypes.byref(h), len(shape), Dims(*shape), F32,
                                                               Dims(*strides)), f"memory descriptor {list(shape)}")
        return Desc(self, h)

    def md_any(self, shape) -> "Desc":
        h = _vp()
        self.check(self.c.dnnl_memory_desc_create_with_tag(ctypes.byref(h), len(shape), Dims(*shape), F32, TAG_ANY),
                   f"memory descriptor {list(shape)}")
        return Desc(self, h)

    def memory(self, desc_handle) -> int:
        h = _vp()
        self.check(self.c.dnnl_memory_create(ctypes.byref(h), desc_handle, self.engine, None), "memory")
        return h.value


class Desc:
    """An owned memory descriptor (destroyed with this object)."""

    def __init__(self, lib: Lib, handle: _vp):
        self.handle = handle.value
        weakref.finalize(self, lib.c.dnnl_memory_desc_destroy, self.handle)


class Primitive:
    """A primitive made from a created primitive descriptor `pd`: one memory object per execute argument, whose
    data pointers `execute` sets on each call. Calls are serialised by a lock (the memory objects are shared)."""

    def __init__(self, lib: Lib, pd: _vp, arg_ids: list[int], keep=()):
        self.lib, self.keep = lib, keep                  # keep: descriptors the arguments' memories were made from
        c = lib.c
        self.pd = pd.value
        info = ctypes.c_char_p()
        c.dnnl_primitive_desc_query(self.pd, QUERY_IMPL_INFO, 0, ctypes.byref(info))
        self.impl = (info.value or b"?").decode()
        h = _vp()
        lib.check(c.dnnl_primitive_create(ctypes.byref(h), self.pd), "primitive")
        self.prim = h.value
        self.memories = []
        args = (ExecArg * len(arg_ids))()
        for i, (arg, md) in enumerate(arg_ids):
            m = lib.memory(md)
            self.memories.append(m)
            args[i] = ExecArg(arg, m)
        self.args, self.nargs = args, len(arg_ids)
        self.held: list = [None] * len(arg_ids)           # the data pointer each memory holds now
        self.lock = threading.Lock()
        self._set, self._exe = c.dnnl_memory_set_data_handle, c.dnnl_primitive_execute
        weakref.finalize(self, _free, c, self.prim, self.pd, list(self.memories))

    def query_md(self, what: int) -> int:
        return self.lib.c.dnnl_primitive_desc_query_md(self.pd, what, 0)

    def execute(self, pointers: list[int]) -> None:
        """Run once on these data pointers (one per argument, in `arg_ids` order); blocks until done. A memory
        whose pointer is the one it already holds (the packed weight, the bias) is not set again."""
        with self.lock:
            held = self.held
            for i, p in enumerate(pointers):
                if held[i] != p:
                    self._set(self.memories[i], p)
                    held[i] = p
            status = self._exe(self.prim, self.lib.stream, self.nargs, self.args)
        if status != 0:
            self.lib.check(status, f"execute ({self.impl})")


def _free(c, prim, pd, memories):
    for m in memories:
        c.dnnl_memory_destroy(m)
    c.dnnl_primitive_destroy(prim)
    c.dnnl_primitive_desc_destroy(pd)


def eltwise(act: str, alpha: float, beta: float) -> tuple[int, float, float] | None:
    """(oneDNN eltwise algorithm, alpha, beta) computing the epilogue activation `act` exactly as the ONNX op does
    (torch_fused.activation_'s attributes: Gelu's alpha 1 = the tanh form), or None (PRelu: its own post-op)."""
    e = ELTWISE
    table = {"Relu": (e["relu"], 0.0, 0.0), "LeakyRelu": (e["relu"], alpha, 0.0), "Sigmoid": (e["logistic"], 0, 0),
             "Tanh": (e["tanh"], 0.0, 0.0), "Clip": (e["clip_v2"], alpha, beta),
             "HardSigmoid": (e["hardsigmoid"], alpha, beta), "HardSwish": (e["hardswish"], 1 / 6, 0.5),
             "Gelu": (e["gelu_tanh"] if alpha == 1 else e["gelu_erf"], 0.0, 0.0), "Silu": (e["swish"], 1.0, 0.0),
             "Elu": (e["elu"], alpha, 0.0)}
    return table.get(act)


class PostOps:
    """A primitive attribute whose post-ops are appended in order. `args` are the (execute argument id, memory
    descriptor) pairs they add, `operands` what the caller passes for each ("residual", "slope"). Use as a context
    manager: the attribute is destroyed on exit (a primitive descriptor made with it keeps its own copy)."""

    def __init__(self, lib: Lib):
        self.lib, self.args, self.operands, self.keep, self.n = lib, [], [], [], 0
        self.attr, self.po = _vp(), _vp()
        lib.check(lib.c.dnnl_primitive_attr_create(ctypes.byref(self.attr)), "attributes")
        lib.check(lib.c.dnnl_post_ops_create(ctypes.byref(self.po)), "post-ops")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.lib.c.dnnl_post_ops_destroy(self.po)
        self.lib.c.dnnl_primitive_attr_destroy(self.attr)

    def _next_base(self) -> int:
        self.n += 1
        return POST_OP_ARG_BASE * self.n

    def activation(self, act: str, alpha: float, beta: float) -> None:
        alg, a, b = eltwise(act, alpha, beta)
        self.lib.check(self.lib.c.dnnl_post_ops_append_eltwise(self.po, alg, a, b), f"{act} post-op")
        self.n += 1

    def add(self, md_handle: int) -> None:
        """+ a tensor described by `md_handle` (the destination's shape and layout)."""
        base = self._next_base()
        self.lib.check(self.lib.c.dnnl_post_ops_append_binary(self.po, BINARY_ADD, md_handle), "residual post-op")
        self.args.append((base | ARG_SRC_1, md_handle))
        self.operands.append("residual")

    def prelu(self, mask: int, slope_md: "Desc") -> None:
        base = self._next_base()
        self.lib.check(self.lib.c.dnnl_post_ops_append_prelu(self.po, mask), "PRelu post-op")
        self.args.append((base | ARG_WEIGHTS, slope_md.handle))
        self.operands.append("slope")
        self.keep.append(slope_md)

    def done(self) -> _vp:
        self.lib.check(self.lib.c.dnnl_primitive_attr_set_post_ops(self.attr, self.po), "post-ops")
        return self.attr


_PACKED: WeakIdKeyDictionary = WeakIdKeyDictionary()   # weight tensor → [(owner Primitive, layout md, packed)]
_PACK_LOCK = threading.Lock()
PACK_COUNT = [0]                                        # reorders done in this process (tests read it)


def packed_weight(lib: Lib, w: torch.Tensor, source, owner: Primitive, md: int) -> torch.Tensor:
    """The weight tensor `w` reordered into the layout `md` that the primitive `owner` asks for: done once per
    (weight tensor, layout) and shared by every primitive asking for that layout — the contexts of one engine share
    their CPU weight tensors, so once per engine. `source()` gives (float32 tensor, oneDNN dims, strides in
    elements) describing w's values; it is called only when a reorder is needed. `owner` is kept with the entry
    (its descriptor owns `md`). Published whole under the lock."""
    for _, have, t in _PACKED.get(w) or ():
        if lib.c.dnnl_memory_desc_equal(have, md):
            return t
    with _PACK_LOCK:
        for _, have, t in _PACKED.get(w) or ():
            if lib.c.dnnl_memory_desc_equal(have, md):
                return t
        src, dims, strides = source()
        plain = lib.md(dims, strides)
        out = torch.empty(lib.c.dnnl_memory_desc_get_size(md), dtype=torch.uint8)
        pd = _vp()
        lib.check(lib.c.dnnl_reorder_primitive_desc_create(ctypes.byref(pd), plain.handle, lib.engine, md,
                                                           lib.engine, None), "weight reorder")
        Primitive(lib, pd, [(ARG_SRC, plain.handle), (ARG_DST, md)], [plain]).execute([src.data_ptr(),
                                                                                       out.data_ptr()])
        PACK_COUNT[0] += 1
        _PACKED[w] = list(_PACKED.get(w) or ()) + [(owner, md, out)]
        return out


class LastDerived:
    """make() computed from a tensor once per tensor seen (the last one kept, published as one tuple): a context's
    weights and biases do not change between calls, so converting them is per engine, not per call."""

    def __init__(self):
        self.last: tuple | None = None

    def get(self, t: torch.Tensor, make) -> torch.Tensor:
        last = self.last
        if last is None or last[0] is not t:
            last = self.last = (t, make())
        return last[1]


class PackedSlot(LastDerived):
    """A primitive's packed weight: reordered through `packed_weight` (once per engine and layout), the last weight
    tensor seen kept with its packed form so that a context's calls skip even the look-up. `source()` as in
    packed_weight."""

    def __init__(self, owner: Primitive, md: int):
        super().__init__()
        self.owner, self.md = owner, md

    def get(self, lib: Lib, w: torch.Tensor, source) -> torch.Tensor:
        return super().get(w, lambda: packed_weight(lib, w, source, self.owner, self.md))


class PrimitiveTable:
    """A kernel's primitives, one per key (input shape, operands present, thread count: oneDNN sizes a primitive's
    thread team when it is made), made on first use under a lock and published as a whole new table."""

    def __init__(self):
        self.table: dict = {}
        self.lock = threading.Lock()

    def get(self, key, make):
        p = self.table.get(key)
        if p is None:
            with self.lock:
                p = self.table.get(key)
                if p is None:
                    p = make()
                    self.table = {**self.table, key: p}
        return p

    def __len__(self):
        return len(self.table)

    def __iter__(self):
        return iter(self.table)


class WeightedPrimitive:
    """A primitive with the argument list src, weights (in the layout it asks for), [bias], dst, then its post-ops'
    operands: `create(pd_pointer, attr) -> status` makes the descriptor. posts, in order: ("act", act, alpha, beta)
    | ("add",) (a tensor of dst's shape and layout) | ("prelu", slope Desc, mask). `post_operands` names what each
    post-op takes at execute ("residual", "slope"); `weights` is its PackedSlot."""

    def __init__(self, lib: Lib, src: Desc, wany: Desc, bias: Desc | None, dst: Desc, posts, create, what: str):
        args = [(ARG_SRC, src.handle), (ARG_WEIGHTS, None)] + ([(ARG_BIAS, bias.handle)] if bias else [])
        args.append((ARG_DST, dst.handle))
        with PostOps(lib) as po:
            for p in posts:
                if p[0] == "act":
                    po.activation(*p[1:])
                elif p[0] == "add":
                    po.add(dst.handle)
                else:
                    po.prelu(p[2], p[1])
            pd = _vp()
            lib.check(create(ctypes.byref(pd), po.done()), what)
        self.weights_md = lib.c.dnnl_primitive_desc_query_md(pd.value, QUERY_WEIGHTS_MD, 0)
        args[1] = (ARG_WEIGHTS, self.weights_md)
        self.post_operands = po.operands
        self.prim = Primitive(lib, pd, args + po.args, [src, dst, wany, bias, *po.keep])
        self.weights = PackedSlot(self.prim, self.weights_md)


def bias_vector(bias: torch.Tensor, n: int) -> torch.Tensor:
    """A bias of one or n values as n contiguous float32 values."""
    v = bias.reshape(-1).to(torch.float32)
    return (v.expand(n) if v.numel() == 1 else v).contiguous()


def contiguous_strides(dims) -> list[int]:
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return strides


_LIB: list = []
_LOAD_LOCK = threading.Lock()


def library() -> Lib | None:
    """The library, loaded once per process; None when it cannot be (unavailable_reason() says why)."""
    if not _LIB:
        with _LOAD_LOCK:
            if not _LIB:
                _LIB.append(_load())
    return _LIB[0] if isinstance(_LIB[0], Lib) else None


def unavailable_reason() -> str | None:
    library()
    return _LIB[0] if isinstance(_LIB[0], str) else None


@contextlib.contextmanager
def hidden(reason: str):
    """Within the block the library counts as unavailable for `reason` (builds choose the torch-op tactics):
    bench/cpu.py's same-run A/B. Engines built inside keep running after it (their tactic ids are torch ops)."""
    library()
    saved = list(_LIB)
    _LIB[:] = [reason]
    try:
        yield
    finally:
        _LIB[:] = saved


def tactic_reason(layer, device) -> str | None:
    """Why a float32 CPU tactic on these primitives cannot run `layer` on `device` (another device, the library
    missing, another precision), else None."""
    if device.type != "cpu":
        return "oneDNN primitives through its C library are a CPU tactic"
    why = unavailable_reason()
    if why is not None:
        return why
    if layer.precision not in (None, "float32"):
        return f"a {layer.precision} layer (this tactic runs float32)"
    return None


def _load():
    path = find_library()
    if path is None:
        return f"oneDNN's C library is not installed (pip install {WHEEL})"
    try:
        return Lib(path)
    except (OSError, AttributeError, OneDnnError) as e:
        return f"oneDNN's C library at {path} cannot be used: {e}"
