"""Math helpers for generated kernels, as Triton source text: branch-free GELU, erf and tanh.

Why: GELU's erf (libdevice erff) is a two-branch routine of ~25 instructions plus an accurate exp; with two
GELUs per element a fused kernel is bound by arithmetic, not by memory (BENCH.md: 78 % of copy bandwidth on
an H200). Here every function is one straight line. The core is the normal tail, a ≥ 0,

    Q(a) = ½·erfc(a/√2) = P(Z > a);   Φ(x) = 1 − Q(x) for x > 0, Q(−x) for x ≤ 0;   GELU(x) = x·Φ(x)

in two grades, both fitted by us (Lawson-weighted least squares on Chebyshev nodes, minimising the maximum
RELATIVE error of Q, so Q stays accurate where it is tiny):

    grade  form                                          fit (float64)      use
    f32    Q = e^(−a²/2)·u·R(u), u = 1/(1 + s·a), R deg 7    3.3e-8 relative    float32/float64 outputs
    lo     Q = 2^P(a/3 − 1) for a < 6, else 0, P deg 7       3.3e-6 relative    float16/bfloat16 outputs

Measured in float32 against float64 truth on a dense grid over [−10, 10] (tests/codegen/test_fastmath.py):
GELU within 1.5e-7·(1 + |GELU|) (f32) and 6e-7·(1 + |GELU|) (lo, far below a float16 ulp); erf(x) =
sign(x)·(1 − 2·Q(|x|·√2)) (the "ref" tail, IEEE division) within 3.5e-7 of float64 erf (libdevice erff:
~1.2e-7). On a GPU the MUFU approximations (rsqrt for u = rsqrt(1 + s·a)², exp2; ≤ 2 ulp each, exact in the
interpreter) add ≤ 2e-7·(1 + |GELU|) by the sensitivity of Q to u and e: inside BENCH.md's rtol = atol = 1e-6.
Cost per GELU in sm_90 SASS: f32 ~17 FP32 instructions + 2 MUFU (RSQ, EX2); lo ~14 + 1 MUFU (EX2) — against
~30 with div.full.f32's range fix-ups and roughly 40 for x·½·(1 + erff(x/√2)). Two GELUs per element in
float16 would otherwise saturate the MUFU unit (16/clk/SM) before memory.

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
# lo: Q(a) = exp2(d0 + d1·t + …), t = a/3 − 1, for a < 6 (Q(6) ≈ 1e-9), else 0
LOG2_TAIL = (6.0, [-9.532936096191406, -14.209567070007324, -6.033975601196289, -0.20388314127922058,
                   0.09168320149183273, -0.040953926742076874, 0.016816003248095512, -0.00401277095079422])
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
    if grade == "lo":
        top, coefs = LOG2_TAIL
        return f'''
@triton.jit
def normal_tail_lo(a):
    """Q(a) = P(Z > a) for a ≥ 0 as 2^P(a/3 − 1), 0 beyond a = 6 (grade lo, see codegen/fastmath.py)."""
    t = a * {2.0 / top!r} - 1.0
{_horner("p", "t", coefs)}
    return tl.where(a < {top!r}, tl.exp2(p), 0.0)
'''
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


# name → (source, helpers it calls)
HELPERS: dict[str, tuple[str, list[str]]] = {
    "tanh_f32": (_TANH, []), "gelu_tanh": (_GELU_TANH, []),
    "normal_tail_ref": (_normal_tail("ref"), []), "erf_f32": (_erf("ref"), ["normal_tail_ref"]),
}
for _grade in GRADES:
    HELPERS[f"normal_tail_{_grade}"] = (_normal_tail(_grade), [])
    HELPERS[f"gelu_erf_{_grade}"] = (_gelu_erf(_grade), [f"normal_tail_{_grade}"])


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
