"""Math helpers for generated kernels, as Triton source text: branch-free GELU, erf and tanh.

Why: GELU's erf (libdevice erff) is a two-branch routine of ~25 instructions plus an accurate exp; with two
GELUs per element a fused kernel is bound by arithmetic, not by memory (BENCH.md: 78 % of copy bandwidth on
an H200). Here every function is one straight line. The core is the normal tail, a ≥ 0,

    Q(a) = ½·erfc(a/√2) = P(Z > a);   Φ(x) = 1 − Q(x) for x > 0, Q(−x) for x ≤ 0;   GELU(x) = x·Φ(x)

in two grades, both fitted by us (Lawson-weighted least squares on Chebyshev nodes, minimising the maximum
RELATIVE error of Q, so Q stays accurate where it is tiny):

    grade  form                                          fit (float64)      use
    f32    Q = e^(−a²/2)·u·R(u), u = 1/(1 + s·a), R deg 7    3.3e-8 relative    float32/float64 outputs
    lo     GELU = max(x, 0) − a·2^P(a), a = min(|x|, 6), P deg 6   0.016 fp16 half-ulp   float16/bfloat16 outputs

Grade lo is fitted for float16 results instead: P is the weighted minimax (a linear program over 6001 points
of [0, 6]) of log2 Q(a), weighted by how much relative error of Q a float16 result x·Q(|x|) can take (half an
ulp: 2^-12 relative, more once x·Q is subnormal). The form needs no select: GELU = relu(x) − |x|·Q(|x|) on both
sides (x > 0: x − x·Q; x < 0: x·Q), and the NaN-propagating clamp a = min(|x|, 6) keeps ±inf finite inside
(GELU(+inf) = +inf, GELU(−inf) = −6·Q(6) ≈ −6e-9, the limit 0 in a half type; torch's x·Φ(x) gives NaN there)
and NaN NaN. Weighted error 0.016 of a float16 half-ulp (relative error of Q ≤ 4e-6 where x·Q is normal;
99.7 % of gelu(gelu(x)) correctly rounded; degree 5, one FFMA less, gives 0.27 and 93 %, still within 1 ulp:
the `lean` tactic configs switch to it, LO_LOG2_TAIL_LEAN, for float16 chains only).
Checked exhaustively over all 65536 float16 inputs, alone and as gelu(gelu(x)), against the correctly rounded
float16 of the float64 GELU: within 1 ulp (tests/codegen/test_fastmath_half.py, interpreter and an FMA model).

Measured in float32 against float64 truth on a dense grid over [−10, 10] (tests/codegen/test_fastmath.py):
GELU within 1.5e-7·(1 + |GELU|) (f32) and 6e-7·(1 + |GELU|) (lo); erf(x) =
sign(x)·(1 − 2·Q(|x|·√2)) (the "ref" tail, IEEE division) within 3.5e-7 of float64 erf (libdevice erff:
~1.2e-7). On a GPU the MUFU approximations (rsqrt for u = rsqrt(1 + s·a)², exp2; ≤ 2 ulp each, exact in the
interpreter) add ≤ 2e-7·(1 + |GELU|) by the sensitivity of Q to u and e: inside BENCH.md's rtol = atol = 1e-6.
Cost per GELU in sm_90 SASS (nvdisasm of gelu(gelu(x)), 8 elements per thread, counted per GELU):
f32 ~17 FP32 instructions + 2 MUFU (RSQ, EX2); lo before (2^P(a/3 − 1), P deg 7, two selects): 8 FFMA +
1.5 FSETP (+ HSETP2 on the half input) + FSEL + FADD + FMUL ≈ 13 + 1 MUFU.EX2, 272 SASS instructions for the 8
float16 elements (34 per element); lo now: FMNMX.NAN (|x| clamped) + 6 FFMA (Horner) + MUFU.EX2 + FMNMX (relu) +
FFMA = 9 + 1 MUFU, no division, compare or select: 208 instructions (26 per element, 25 without NOP padding; the
rest is 1 HADD2.F32 widening and ½ F2FP packing per element plus addressing). x·½·(1 + erff(x/√2)) costs
roughly 40. Two GELUs per element in float16 would otherwise bind the FP32 pipe before memory.

tanh: x + x³·P(x²) (P of degree 4, fitted on [0, 0.625], max relative error 4.4e-9 in float64) for
|x| < 0.625, else sign(x)·(1 − 2/(e^{2|x|} + 1)); measured max relative error 2e-7 in float32.
GELU's tanh form is evaluated as x·σ(2u) = x / (1 + e^{−2u}) (no cancellation): within 1e-7·(1 + |GELU|).
"""

import math

# f32: Q(a) = exp2(−a²·K) · u · (c0 + c1·u + …), u = 1/(1 + S·a); coefficients include the ½ of Q
K = 0.7213475108146667                                       # log2(e) / 2
RATIONAL = (0.29698485136032104, [0.11836376786231995, 0.12047357857227325, 0.09341307729482651,
                                  0.14662913978099823, -0.0872659757733345, 0.24322757124900818,
                                  -0.1729384958744049, 0.038097355514764786])
# lo: GELU = max(x, 0) − a·exp2(P(a)), a = min(|x|, LO_CLAMP); P(a) ≈ log2 Q(a), coefficients low order first
LO_CLAMP = 6.0
LO_LOG2_TAIL = [-1.0000057220458984, -1.1510707139968872, -0.4590742588043213, -0.05315093323588371,
                0.007988318800926208, -0.0007582418038509786, 3.3226435334654525e-05]
# lean variant (configs with lean=1, float16 chains): degree 5, one FFMA less, weighted error 0.27 half-ulp
LO_LOG2_TAIL_LEAN = [-1.0001188516616821, -1.149341106414795, -0.46376171708106995, -0.048512548208236694,
                     0.005912553519010544, -0.0003296007344033569]
GRADES = ("f32", "lo")
TANH_SPLIT = 0.625
TANH_POLY = [-0.3333328068256378, 0.13331441581249237, -0.05373971536755562, 0.02063908614218235,
             -0.005704984534531832]
SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _horner(out: str, var: str, coefs: list[float], indent: str = "    ") -> str:
    """Lines computing out = Σ coefs[i]·var^i by Horner's rule (one FMA per line)."""
    lines = [f"{indent}{out} = {coefs[-1]!r}"]
    for c in reversed(coefs[:-1]):
        lines.append(f"{indent}{out} = {out} * {var} {'-' if c < 0 else '+'} {abs(c)!r}")
    return "\n".join(lines)


def _normal_tail(grade: str) -> str:
    scale, coefs = RATIONAL
    if grade == "f32":        # u = rsqrt(1 + s·a)²: one MUFU.RSQ, no division range fix-ups
        recip = f"    r0 = tl.rsqrt(1.0 + {scale!r} * a)\n    u = r0 * r0"
    else:                     # "ref": IEEE division, for the standalone erf
        recip = f"    u = 1.0 / (1.0 + {scale!r} * a)"
    return f'''
@triton.jit
def normal_tail_{grade}(a):
    """Q(a) = P(Z > a) = ½·erfc(a/√2) for a ≥ 0 as e^(−a²/2)·u·R(u) (grade {grade}, see codegen/fastmath.py)."""
{recip}
    e = tl.exp2(-(a * a) * {K!r})
{_horner("r", "u", coefs)}
    return e * (u * r)
'''


def _gelu_erf(grade: str) -> str:
    if grade == "lo":
        return f'''
@triton.jit
def gelu_erf_lo(x, LEAN: tl.constexpr = False):
    """GELU for half-type results: relu(x) − a·Q(a), Q(a) = 2^P(a), a = min(|x|, {LO_CLAMP!r}) (NaN kept);
    P of degree 6, or 5 when LEAN (a tactic config: one FFMA less, still within 1 ulp)."""
    a = tl.minimum(tl.abs(x), {LO_CLAMP!r}, propagate_nan=tl.PropagateNan.ALL)
    if LEAN:
{_horner("p", "a", LO_LOG2_TAIL_LEAN, "        ")}
    else:
{_horner("p", "a", LO_LOG2_TAIL, "        ")}
    return tl.maximum(x, 0.0) - a * tl.exp2(p)
'''
    return f'''
@triton.jit
def gelu_erf_{grade}(x):
    """GELU(x) = x·Φ(x), Φ from the normal tail: 1 − Q(x) for x > 0, else Q(−x)."""
    q = normal_tail_{grade}(tl.abs(x))
    return x * tl.where(x > 0, 1.0 - q, q)
'''


def _erf(grade: str) -> str:
    return f'''
@triton.jit
def erf_f32(x):
    """erf(x) = sign(x)·(1 − 2·Q(|x|·√2))."""
    q = normal_tail_{grade}(tl.abs(x) * {math.sqrt(2.0)!r})
    return tl.where(x < 0, 2.0 * q - 1.0, 1.0 - 2.0 * q)
'''


_TANH = f'''
@triton.jit
def tanh_f32(x):
    """tanh: odd polynomial near 0, 1 − 2/(e^(2|x|) + 1) elsewhere (see codegen/fastmath.py)."""
    a = tl.abs(x)
    s = x * x
{_horner("p", "s", TANH_POLY)}
    small = x + x * s * p
    big = 1.0 - 2.0 / (tl.exp(2.0 * a) + 1.0)
    return tl.where(a < {TANH_SPLIT!r}, small, tl.where(x < 0, -big, big))
'''

_GELU_TANH = f'''
@triton.jit
def gelu_tanh(x):
    """x·½·(1 + tanh(u)) = x·σ(2u) = x / (1 + e^(−2u)),  u = √(2/π)·(x + 0.044715·x³)."""
    u = {SQRT_2_OVER_PI!r} * (x + 0.044715 * (x * x * x))
    return x / (1.0 + tl.exp(-2.0 * u))
'''


_QUANTIZE_INT = '''
@triton.jit
def quantize_int(x, s, z, lo, hi):
    """ONNX QuantizeLinear onto an integer grid, as float values: RN(x / s) (the IEEE quotient, div_rn), + z,
    saturated to [lo, hi]. Clamping the quotient to [lo − z, hi − z] first equals clamping after (integer bounds,
    monotone rounding) and keeps |v| < 2²², where (v + 1.5·2²³) − 1.5·2²³ rounds half to even (adds only: nothing
    for FMA contraction to change)."""
    v = tl.minimum(tl.maximum(tl.math.div_rn(x, s), lo - z), hi - z)
    return ((v + 12582912.0) - 12582912.0) + z
'''


# name → (source, helpers it calls)
HELPERS: dict[str, tuple[str, list[str]]] = {
    "tanh_f32": (_TANH, []), "gelu_tanh": (_GELU_TANH, []),
    "normal_tail_ref": (_normal_tail("ref"), []), "erf_f32": (_erf("ref"), ["normal_tail_ref"]),
    "quantize_int": (_QUANTIZE_INT, []),
}
HELPERS["normal_tail_f32"] = (_normal_tail("f32"), [])
HELPERS["gelu_erf_f32"] = (_gelu_erf("f32"), ["normal_tail_f32"])
HELPERS["gelu_erf_lo"] = (_gelu_erf("lo"), [])


def helpers_source(names) -> str:
    """The Triton source of the named helpers and of the helpers they call, each once, callees first."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name not in HELPERS:
            raise KeyError(f"no fast-math helper named {name!r}; known: {sorted(HELPERS)}")
        for dep in HELPERS[name][1]:
            visit(dep)
        if name not in order:
            order.append(name)
    for name in sorted(names):
        visit(name)
    return "".join(HELPERS[n][0] for n in order)
