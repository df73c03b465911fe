"""Importers for MatMul, Gemm and Einsum.

Gemm 6/7/9/11/13 (C optional from 11 on; version 6's `broadcast` attribute only allows what numpy-style
broadcasting of C to (M, N), used from version 7 on, already does). Einsum 12/28 (28 adds bfloat16): the equation is made explicit here — spaces
removed and, without '->', the output term is every letter used exactly once in ASCII order (upper case
before lower case), after '...' when an operand has one — so the IR never depends on implicit rules.
"""

from collections import Counter

from ...util.errors import ModelError
from ..registry import importer


@importer("MatMul", versions=(1, 9, 13))
def import_matmul(ctx, node, inputs):
    return [ctx.add1("MatMul", inputs[:2])]


@importer("Gemm", versions=(6, 7, 9, 11, 13))
def import_gemm(ctx, node, inputs):
    attrs = {k: node.attrs[k] for k in ("alpha", "beta", "transA", "transB")}
    return [ctx.add1("Gemm", inputs[:3], attrs)]


def explicit_equation(equation: str, where: str = "") -> str:
    eq = equation.replace(" ", "")
    if "->" in eq:
        return eq
    terms = eq.split(",")
    counts = Counter(ch for term in terms for ch in term.replace("...", "") if ch.isalpha())
    bad = [ch for ch in eq.replace("...", "") if not (ch.isalpha() or ch == ",")]
    if bad:
        raise ModelError(f"{where}Einsum equation {equation!r} has invalid character {bad[0]!r}", "re-export the model")
    out = "".join(sorted(ch for ch, n in counts.items() if n == 1))
    return eq + "->" + ("..." if "..." in eq else "") + out


@importer("Einsum", versions=(12, 28))
def import_einsum(ctx, node, inputs):
    if not node.attrs.get("equation"):
        raise ModelError(f"{node.where()}: the equation attribute is required", "re-export the model")
    equation = explicit_equation(node.attrs["equation"], f"{node.where()}: ")
    return [ctx.add1("Einsum", inputs, {"equation": equation})]
