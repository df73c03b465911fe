"""Math helpers for generated kernels, as Triton source text: branch-free GELU, erf and tanh.

Why: GELU's erf (libdevice erff) is a two-branch routine of ~25 instructions plus an accurate exp; with two
GELUs per element a fused kernel is bound by arithmetic, not by memory (BENCH.md: 78 % of copy bandwidth on
an H200). Here every function is one straight line: a division, an exp2 and a short polynomial.

The core is the normal tail  Q(a) = ½·erfc(a/√2) = P(Z > a), a ≥ 0, written as

    Q(a) = exp(−a²/2) · u · R(u),     u = 1 / (1 + s·a)

where erfc(t)·exp(t²) = 2·u·R(u) was fitted (by us) on t ∈ [0, 6] by Lawson-weighted least squares on 8000
Chebyshev nodes, minimising the maximum relative error (relative, so that Q is accurate where it is tiny):

    grade  degree of R   s·√2    relative error of the fit (float64)   use
    f32    7             0.42    3.3e-8                                 float32/float64 outputs
    lo     4             0.35    1.7e-5                                 float16/bfloat16 outputs

    Φ(x) = 1 − Q(x) for x > 0, Q(−x) for x ≤ 0;   GELU(x) = x·Φ(x);   erf(x) = sign(x)·(1 − 2·Q(|x|·√2)).

Measured in float32 against float64 truth on a dense grid over [−10, 10] (tests/codegen/test_fastmath.py):
|Φ error| ≤ 2.5e-7, GELU within 1e-7·(1 + |GELU|), |erf error| ≤ 3.5e-7 (grade f32; libdevice erff: ~1.2e-7);
the lo grade keeps GELU within 5e-6·(1 + |GELU|), far below a float16 ulp. Cost per GELU: one approximate
division, one exp2, 8 (or 5) FMAs and ~6 other ops, against roughly 40 for x·½·(1 + erff(x/√2)).

tanh: x + x³·P(x²) (P of degree 4, fitted on [0, 0.625], max relative error 4.4e-9 in float64) for
|x| < 0.625, else sign(x)·(1 − 2/(e^{2|x|} + 1)); measured max relative error 2e-7 in float32.
GELU's tanh form is evaluated as x·σ(2u) = x / (1 + e^{−2u}) (no cancellation): within 1e-7·(1 + |GELU|).
"""

import math

# Q(a) = exp2(−a²·K) · u · (c0 + c1·u + …),  u = 1/(1 + S·a); coefficients include the ½ of Q
K = 0.7213475108146667                                       # log2(e) / 2
GRADES = {
    "f32": (0.29698485136032104, [0.11836376786231995, 0.12047357857227325, 0.09341307729482651,
                                  0.14662913978099823, -0.0872659757733345, 0.24322757124900818,
                                  -0.1729384958744049, 0.038097355514764786]),
    "lo": (0.2474873661994934, [0.10189695656299591, 0.06675058603286743, 0.21844634413719177,
                                -0.15730538964271545, 0.2702159881591797]),
}
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
    scale, coefs = GRADES[grade]
    return f'''
@triton.jit
def normal_tail_{grade}(a):
    """Q(a) = P(Z > a) = ½·erfc(a/√2) for a ≥ 0 (grade {grade}, see codegen/fastmath.py)."""
    u = tl.fdiv(1.0, 1.0 + {scale!r} * a, ieee_rounding=False)
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
def erf_{grade}(x):
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
HELPERS: dict[str, tuple[str, list[str]]] = {"tanh_f32": (_TANH, []), "gelu_tanh": (_GELU_TANH, [])}
for _grade in GRADES:
    HELPERS[f"normal_tail_{_grade}"] = (_normal_tail(_grade), [])
    HELPERS[f"gelu_erf_{_grade}"] = (_gelu_erf(_grade), [f"normal_tail_{_grade}"])
    HELPERS[f"erf_{_grade}"] = (_erf(_grade), [f"normal_tail_{_grade}"])


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
