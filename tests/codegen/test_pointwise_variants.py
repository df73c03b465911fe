"""The generated kernel's variant configs (kernels/triton_pointwise.py CONFIGS: lean, persist, stream, stages)
under TRITON_INTERPRET=1, each against a closed form in float64: the seed's gelu(gelu(x)) on every float16 input
within 1 ulp of the correctly rounded float64 GELU x·Φ(x) (torch's ndtr), float32 chains within 1e-6, broadcast
inputs and a ragged tail through the persistent loop; a numpy model of the lean polynomial as the GPU evaluates
it (FFMA, exp2 ±2 ulp); which configs `fits` offers, and that a persistent config launches fewer programs than
tiles (so the loop, not one tile per program, is what the numerics above checked).
"""

import math

import numpy as np
import pytest
import torch

from tensorforge.codegen import generate_pointwise
from tensorforge.codegen.fastmath import LO_LOG2_TAIL_LEAN
from tensorforge.ir import Layer
from tensorforge.kernels import generated
from tensorforge.kernels.triton_pointwise import CONFIGS, TritonPointwise
from half_oracle import ALL, exact_gelu, fma_model, ulps_off

CPU = torch.device("cpu")
VARIANTS = [c for c in CONFIGS if set(c) - {"BLOCK", "warps"}]
GELU = {"approximate": "none"}


def gelu_chain(n_gelu: int, in_dtype=torch.float16, out="float16") -> Layer:
    steps = [{"op": "Gelu", "args": ["in0" if k == 0 else f"s{k - 1}"], "attrs": GELU} for k in range(n_gelu)]
    layer = Layer("chain", "PointwiseChain", ["x"], ["y"],
                  {"steps": steps, "outputs": [f"s{n_gelu - 1}"], "out_dtypes": [out]})
    layer.attrs["kernel"] = generated.register_source(generate_pointwise(layer, [in_dtype], 1))
    return layer


def bias_gelu_chain(dtype: str) -> Layer:
    """(x + b)·gelu(x + b)·½ over (R, C) with b of shape (C,): a broadcast input (strided index, one modulo)."""
    steps = [{"op": "Add", "args": ["in0", "in1"], "attrs": {}}, {"op": "Gelu", "args": ["s0"], "attrs": GELU},
             {"op": "Mul", "args": ["s1", "c0"], "attrs": {}}]
    layer = Layer("chain", "PointwiseChain", ["x", "b"], ["y"],
                  {"steps": steps, "consts": [{"value": 0.5, "dtype": dtype, "shape": []}], "outputs": ["s2"],
                   "out_dtypes": [dtype]})
    tdt = getattr(torch, dtype)
    layer.attrs["kernel"] = generated.register_source(generate_pointwise(layer, [tdt, tdt], 2))
    return layer


def cfg_id(cfg: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(cfg.items()))


def closed_gelu64(x64: torch.Tensor) -> torch.Tensor:
    return x64 * 0.5 * (1 + torch.erf(x64 / math.sqrt(2)))


@pytest.fixture(scope="module")
def seed_outputs():
    """gelu(gelu(x)) on every float16 value, repeated 3× plus a ragged tail of 123 (every persistent config then
    loops over tiles), for each variant config; and gelu(x) alone for the lean ones."""
    x = torch.cat([ALL.repeat(3), ALL[:123]])
    two, one = gelu_chain(2), gelu_chain(1)
    out = {}
    for cfg in VARIANTS:
        out[cfg_id(cfg), 2] = TritonPointwise.build(two, cfg, CPU)([x])[0].numpy()
        if cfg.get("lean"):
            out[cfg_id(cfg), 1] = TritonPointwise.build(one, cfg, CPU)([x])[0].numpy()
    return x.numpy(), out


@pytest.mark.parametrize("cfg", VARIANTS, ids=cfg_id)
def test_variant_half_gelu_within_one_ulp_of_float64_everywhere(seed_outputs, cfg):
    x, out = seed_outputs
    x64 = x.astype(np.float64)
    once = exact_gelu(x64)
    for n_gelu, exact in ((2, exact_gelu(once)), (1, once)):
        if (cfg_id(cfg), n_gelu) not in out:
            continue
        d = ulps_off(out[cfg_id(cfg), n_gelu], exact)
        assert d.max() <= 1, (cfg, n_gelu, int(d.max()), x64[d.argmax()])
        # degree 6: 99.7 % correctly rounded; lean (degree 5): 93 % for gelu(gelu(x)), 95.7 % for one GELU
        assert (d == 0).mean() > (0.92 if cfg.get("lean") else 0.995), (cfg, n_gelu, (d == 0).mean())


@pytest.mark.parametrize("ex2_ulps", [-2, 0, 2])
def test_lean_polynomial_fma_model_within_one_ulp(ex2_ulps):
    """The degree-5 polynomial as the GPU runs it (one rounding per FFMA, MUFU.EX2 off by up to 2 ulp)."""
    x = ALL.numpy().astype(np.float32)
    x64 = x.astype(np.float64)
    once = fma_model(x, ex2_ulps, coefs=LO_LOG2_TAIL_LEAN)
    assert ulps_off(once, exact_gelu(x64)).max() <= 1
    twice = fma_model(once, ex2_ulps, coefs=LO_LOG2_TAIL_LEAN)
    assert ulps_off(twice, exact_gelu(exact_gelu(x64))).max() <= 1


def test_lean_check_can_fail():
    """The 1-ulp check above catches a polynomial one degree short of the lean one (the degree-4 fit)."""
    x = ALL.numpy().astype(np.float32)
    deg4 = [-1.0009765625, -1.139858365058899, -0.48193857073783875, -0.03619837388396263, 0.0025053874123841524]
    assert ulps_off(fma_model(x, coefs=deg4), exact_gelu(x.astype(np.float64))).max() > 1


@pytest.mark.parametrize("cfg", [c for c in VARIANTS if not c.get("lean")] + [{"BLOCK": 256, "warps": 4, "persist": 3,
                                 "stream": 1, "stages": 2}], ids=cfg_id)
def test_float32_variants_with_a_broadcast_input_and_a_ragged_tail(cfg):
    torch.manual_seed(0)
    x, b = torch.randn(257, 129) * 3, torch.randn(129)
    got = TritonPointwise.build(bias_gelu_chain("float32"), cfg, CPU)([x, b])[0]
    y = x.double() + b.double()
    want = closed_gelu64(y) * 0.5
    assert got.dtype == torch.float32 and got.shape == x.shape
    assert float(((got.double() - want).abs() - 1e-6 * want.abs()).max()) <= 1e-6


def test_persistent_gelu_float32_and_int64_offsets_path():
    """gelu(gelu(x)) in float32 through a persistent config (grade f32: lean does not apply there)."""
    x = torch.linspace(-8, 8, 40_000)
    cfg = {"BLOCK": 512, "warps": 4, "persist": 4}
    got = TritonPointwise.build(gelu_chain(2, torch.float32, "float32"), cfg, CPU)([x])[0].double()
    want = closed_gelu64(closed_gelu64(x.double()))
    assert float(((got - want).abs() - 1e-6 * want.abs()).max()) <= 1e-6


class _Recorder:
    """Stands in for a generated kernel: records each launch's grid, then launches the real one."""

    def __init__(self, fn):
        self.fn, self.grids = fn, []

    def __getitem__(self, grid):
        self.grids.append(grid)
        return self.fn[grid]


def test_persistent_launch_has_fewer_programs_than_tiles(monkeypatch):
    layer = gelu_chain(2)
    module = generated.load_module(layer.attrs["kernel"])
    rec = _Recorder(module["pointwise_kernel_variant"])
    monkeypatch.setitem(module, "pointwise_kernel_variant", rec)
    x = ALL[:20_000]
    cfg = {"BLOCK": 1024, "warps": 4, "lean": 1, "persist": 2}     # 2 per SM × 2 interpreter "SMs" = 4 programs
    got = TritonPointwise.build(layer, cfg, CPU)([x])[0].numpy()
    assert rec.grids == [(4,)]                                       # 20 tiles → 4 programs, 5 tiles each
    x64 = x.numpy().astype(np.float64)
    assert ulps_off(got, exact_gelu(exact_gelu(x64))).max() <= 1
    plain = TritonPointwise.build(layer, {"BLOCK": 1024, "warps": 4, "lean": 1}, CPU)([x])[0].numpy()
    assert rec.grids[-1] == (20,)                                    # no persist: one program per tile


def test_fits_offers_variants_only_where_they_apply():
    fits = TritonPointwise.fits
    half, f32 = gelu_chain(2), gelu_chain(2, torch.float32, "float32")
    big = [torch.empty(1 << 20, dtype=torch.float16)]
    assert fits(half, {"BLOCK": 2048, "warps": 4, "lean": 1}, big) is None
    why = fits(f32, {"BLOCK": 2048, "warps": 4, "lean": 1}, [torch.empty(1 << 20)])
    assert why is not None and "GELU" in why
    assert fits(half, {"BLOCK": 2048, "warps": 4, "persist": 8}, big) is None        # 2 SMs · 8 · 2 tiles ≤ 512
    why = fits(half, {"BLOCK": 2048, "warps": 4, "persist": 8}, [torch.empty(40_000, dtype=torch.float16)])
    assert why is not None and "two tiles" in why
    assert fits(half, CONFIGS[0], [torch.empty(8, dtype=torch.float16)]) is None
    # untimed builds keep the first config: no variant switch in it
    assert set(CONFIGS[0]) == {"BLOCK", "warps"}


def test_variant_switches_stay_out_of_the_plain_kernel():
    """The plain kernel keeps its ABI (compile tests and cached engines name its constexprs); the variant kernel
    takes the switches; a chain without a half GELU says so (HAS_LEAN) for `fits`."""
    src = generate_pointwise(gelu_chain(2), [torch.float16], 1)
    plain = src[src.index("def pointwise_kernel("):].split("\n", 1)[0]
    variant = src[src.index("def pointwise_kernel_variant("):].split("\n", 1)[0]
    assert "LEAN" not in plain and "PERSIST" not in plain
    assert all(k in variant for k in ("LEAN: tl.constexpr", "PERSIST: tl.constexpr", "STREAM: tl.constexpr"))
    assert "HAS_LEAN = True" in src
    assert "HAS_LEAN = False" in generate_pointwise(gelu_chain(2, torch.float32, "float32"), [torch.float32], 1)


class _Props:
    max_threads_per_multi_processor, regs_per_multiprocessor = 2048, 65536


@pytest.mark.parametrize("regs, warps, per_sm, want", [(32, 4, 16, 16), (40, 4, 16, 12), (33, 4, 16, 12),
                                                       (32, 8, 16, 8), (64, 4, 8, 8), (128, 4, 8, 4)])
def test_resident_programs_per_sm(monkeypatch, regs, warps, per_sm, want):
    """Hand-computed: 2048 threads and 65536 registers per SM, registers allocated per warp in units of 256
    (33 registers → 1280 per warp → 65536 / (1280·4) = 12 programs of 4 warps)."""
    from tensorforge.kernels import triton_pointwise
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: _Props())
    assert triton_pointwise._resident(regs, CPU, warps, per_sm) == want


def test_persistent_grid_shrinks_to_what_fits_after_the_first_launch(monkeypatch):
    """A compiled kernel reporting 40 registers: 16 programs of 4 warps do not fit on one SM, 12 do, so the
    second launch (the one a CUDA graph captures) uses 12 per SM; both launches compute every element."""
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: _Props())
    layer = gelu_chain(2)
    module = generated.load_module(layer.attrs["kernel"])

    class Compiled:
        n_regs = 40

    class Launch(_Recorder):
        def __getitem__(self, grid):
            launch = super().__getitem__(grid)
            return lambda *a, **k: (launch(*a, **k), Compiled())[1]
    rec = Launch(module["pointwise_kernel_variant"])
    monkeypatch.setitem(module, "pointwise_kernel_variant", rec)
    x = ALL[:40 * 512]
    kernel = TritonPointwise.build(layer, {"BLOCK": 512, "warps": 4, "lean": 1, "persist": 16}, CPU)
    first, second = kernel([x])[0].numpy(), kernel([x])[0].numpy()
    assert rec.grids == [(32,), (24,)]                   # 16 · 2 interpreter SMs, then 12 · 2
    want = exact_gelu(exact_gelu(x.numpy().astype(np.float64)))
    assert ulps_off(first, want).max() <= 1 and (first == second).all()


def test_lean_never_applies_to_bfloat16_chains():
    """The lean polynomial is fitted to float16's half-ulp: a bfloat16 GELU chain keeps degree 6 whatever the
    config says (the switch is not wired in), and `fits` does not offer lean for it."""
    layer = gelu_chain(2, torch.bfloat16, "bfloat16")
    src = generated._SOURCES[layer.attrs["kernel"]]
    assert "gelu_erf_lo(x0, False)" in src and "HAS_LEAN = False" in src
    assert TritonPointwise.fits(layer, {"BLOCK": 2048, "warps": 4, "lean": 1},
                                [torch.empty(1 << 20, dtype=torch.bfloat16)]) is not None
    x = torch.linspace(-6, 6, 4097).to(torch.bfloat16)
    plain = TritonPointwise.build(layer, {"BLOCK": 1024, "warps": 4}, CPU)([x])[0]
    forced = TritonPointwise.build(layer, {"BLOCK": 1024, "warps": 4, "lean": 1}, CPU)([x])[0]
    assert torch.equal(plain.view(torch.int16), forced.view(torch.int16))
    want = closed_gelu64(closed_gelu64(x.double()))
    # within one bfloat16 ulp (≤ 2^-7·|y|; the interpreter's float32 → bfloat16 store truncates)
    assert float(((plain.double() - want).abs() - 2 ** -7 * want.abs()).max()) <= 1e-6


def test_persistent_stream_multi_input_multi_output_chain():
    """Three inputs (one broadcast), an infinite literal, float32/int32/bool outputs through the persistent loop
    with .cs stores, against the PointwiseChain reference (torch ops)."""
    from tensorforge.ir import get_spec
    from test_pointwise_codegen import assert_match, chain, lit
    torch.manual_seed(1)
    x, y, z = torch.randn(37, 53), torch.randn(37, 53), torch.randn(53)
    steps = [("Sum", ["in0", "in1", "in2"], {}), ("Max", ["s0", "in1"], {}), ("Clip", ["s1", "c0", "c1"], {}),
             ("Greater", ["in0", "c2"], {}), ("Where", ["s3", "s2", "c3"], {}), ("Cast", ["s4"], {"to": "int32"})]
    consts = [lit(-0.5), lit(0.75), lit(0.0), lit(-math.inf)]
    layer = chain(steps, [x.dtype] * 3, ["float32", "int32", "bool"], consts, outputs=["s4", "s5", "s3"])
    layer.attrs["kernel"] = generated.register_source(generate_pointwise(layer, [x.dtype] * 3, 2))
    ref = list(get_spec("PointwiseChain").reference(x, y, z, **layer.attrs))
    cfg = {"BLOCK": 64, "warps": 4, "persist": 3, "stream": 1}     # 31 tiles over 6 programs
    assert TritonPointwise.fits(layer, cfg, [x, y, z]) is None
    assert_match(TritonPointwise.build(layer, cfg, CPU)([x, y, z]), ref)
