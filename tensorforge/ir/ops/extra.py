"""Standard ops that fit no other family: RMSNormalization, Swish, SwiGLU, Shrink, CumProd, Det, Unique,
TfIdfVectorizer (integer pools; string tensors are out of scope).

RMSNormalization: y = x / sqrt(mean(x², axes=[axis..rank-1]) + ε) · scale, computed in float32 when
stash_type = 1 (one read of x for the statistics, one read and one write for the output).
Swish(x) = x·σ(αx); SwiGLU(a, b) = Swish(a)·b; Shrink: x+bias if x<-λ, x-bias if x>λ, else 0 (pointwise).
CumProd: inclusive/exclusive, forward/reverse running product along `axis` (one pass).
Det: determinant of the trailing 2-D matrices (LU factorisation, O(n³) each).
Unique: distinct values/slices with first indices, inverse and counts (sizes known only at run time).
"""

import torch

from .. import dynamic
from ..opspec import REQUIRED, op


@op("RMSNormalization", attrs={"axis": -1, "epsilon": 1e-5, "stash_type": 1})
def rms_normalization(x, scale, axis, epsilon, stash_type):
    axis = axis % x.dim()
    xs = x.float() if stash_type == 1 else x
    dims = tuple(range(axis, x.dim()))
    normed = xs / torch.sqrt(torch.mean(xs * xs, dim=dims, keepdim=True) + epsilon)
    return normed.to(x.dtype) * scale.to(x.dtype)


@op("Swish", attrs={"alpha": 1.0})
def swish(x, alpha): return x * torch.sigmoid(alpha * x)


@op("SwiGLU", attrs={"alpha": 1.0})
def swiglu(a, b, alpha):
    if a.shape != b.shape:
        raise ValueError(f"SwiGLU inputs must have identical shapes, got {tuple(a.shape)} and {tuple(b.shape)}")
    return a * torch.sigmoid(alpha * a) * b


@op("Shrink", attrs={"lambd": 0.5, "bias": 0.0})
def shrink(x, lambd, bias):
    zero = torch.zeros_like(x)
    return torch.where(x < -lambd, x + bias, torch.where(x > lambd, x - bias, zero)).to(x.dtype)


@op("CumProd", attrs={"exclusive": 0, "reverse": 0}, value_inputs=(1,))
def cum_prod(x, axis, exclusive, reverse):
    """y[i] = Π_{j ≤ i} x[j] (j < i when exclusive; from the end when reverse)."""
    dim = int(axis.reshape(-1)[0].item()) % max(x.dim(), 1)
    if reverse:
        x = torch.flip(x, (dim,))
    y = torch.cumprod(x, dim=dim).to(x.dtype)   # torch promotes int32 to int64
    if exclusive:
        ones = torch.ones_like(y.narrow(dim, 0, 1))
        y = torch.cat([ones, y.narrow(dim, 0, y.shape[dim] - 1)], dim=dim)
    return torch.flip(y, (dim,)) if reverse else y


@op("Det")
def det(x):
    """det of each trailing n×n matrix: (*, n, n) → (*)."""
    return torch.linalg.det(x.float() if x.dtype == torch.float16 else x).to(x.dtype)


def _unique_infer(x, *, axis=None, sorted=1):
    n = x.numel() if axis is None else x.shape[axis]
    shape = (n,) if axis is None else tuple(n if i == axis % x.dim() else s for i, s in enumerate(x.shape))
    return (dynamic.data_dependent(shape, x.dtype), dynamic.data_dependent((n,), torch.int64),
            dynamic.data_dependent((n,), torch.int64), dynamic.data_dependent((n,), torch.int64))


@op("Unique", attrs={"axis": None, "sorted": 1}, infer=_unique_infer)
def unique(x, *, axis=None, sorted=1):  # noqa: A002 - ONNX's attribute name
    """Returns (y, first-occurrence indices, inverse indices, counts): the distinct values (or slices along
    axis), ascending when sorted, else in order of first occurrence. Output sizes depend on the data."""
    src = x.reshape(-1) if axis is None else x
    dim = 0 if axis is None else axis % x.dim()
    y, inverse, counts = torch.unique(src, sorted=True, return_inverse=True, return_counts=True, dim=dim)
    n = src.shape[dim]
    first = torch.full((y.shape[dim],), n, dtype=torch.int64, device=x.device)
    first = first.scatter_reduce(0, inverse, torch.arange(n, device=x.device), reduce="amin")
    if not sorted:
        order = torch.argsort(first)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(order.numel(), device=x.device)
        y, first, counts, inverse = y.index_select(dim, order), first[order], counts[order], rank[inverse]
    return y, first, inverse.reshape(-1), counts



def _tfidf_infer(x, *, ngram_indexes, **_):
    size = max(ngram_indexes) + 1
    return torch.empty((size,) if x.dim() <= 1 else (x.shape[0], size), dtype=torch.float32, device="meta")


@op("TfIdfVectorizer", attrs={"max_gram_length": REQUIRED, "max_skip_count": REQUIRED, "min_gram_length": REQUIRED,
                              "mode": REQUIRED, "ngram_counts": REQUIRED, "ngram_indexes": REQUIRED,
                              "pool_int64s": REQUIRED, "weights": None}, infer=_tfidf_infer)
def tfidf_vectorizer(x, *, max_gram_length, max_skip_count, min_gram_length, mode, ngram_counts, ngram_indexes,
                     pool_int64s, weights=None):
    """Count the pool's n-grams (min..max length, items skip+1 apart for skip ≤ max_skip_count; unigrams
    once) in each row of x, then weight: TF = count, IDF = weight·[count>0], TFIDF = weight·count.
    The pool holds the (i+1)-grams from ngram_counts[i] on; gram number j lands in column ngram_indexes[j]."""
    column: dict[tuple, int] = {}
    gram_id = 0
    for i, begin in enumerate(ngram_counts):
        end = ngram_counts[i + 1] if i + 1 < len(ngram_counts) else len(pool_int64s)
        n = i + 1
        for start in range(begin, end, n):
            if min_gram_length <= n <= max_gram_length:
                column[tuple(pool_int64s[start:start + n])] = ngram_indexes[gram_id]
            gram_id += 1
    size = max(ngram_indexes) + 1
    rows = [x.tolist()] if x.dim() <= 1 else x.tolist()
    counts = torch.zeros(len(rows), size, dtype=torch.float64)
    for r, row in enumerate(rows):
        for skip in range(1, max_skip_count + 2):
            smallest = min_gram_length if skip == 1 else max(min_gram_length, 2)
            for start in range(len(row)):
                for n in range(smallest, max_gram_length + 1):
                    last = start + (n - 1) * skip
                    if last >= len(row):
                        break
                    col = column.get(tuple(row[start:last + 1:skip]))
                    if col is not None:
                        counts[r, col] += 1
    w = torch.tensor(weights, dtype=torch.float64) if weights else None
    if mode == "IDF":
        counts = (counts > 0).double() * (w if w is not None else 1.0)
    elif mode == "TFIDF" and w is not None:
        counts = counts * w
    elif mode not in ("TF", "TFIDF"):
        raise ValueError(f"TfIdfVectorizer mode must be TF, IDF or TFIDF, got {mode!r}")
    out = counts.to(torch.float32).to(x.device)
    return out[0] if x.dim() <= 1 else out
