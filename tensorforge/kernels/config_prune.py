"""Tactic configs that cannot win a problem, dropped before anything is compiled or timed.

Entry points: `prune_tile_configs(configs, m, n, k, elem_bytes, smem_limit)` (GEMM-like tiles: shared memory that
cannot launch, tiles dominated by smaller ones covering the problem), `prune_block_configs(configs, n)`
(elementwise BLOCK/warps configs that run the whole tensor in one program). Used by builder/tactics.py's `_prune`.
"""

def _pow2_at_least(v: int) -> int:
    return 1 << max(0, int(v) - 1).bit_length()


def prune_tile_configs(configs: list[dict], m: int, n: int, k: int, elem_bytes: int,
                       smem_limit: int | None = None) -> tuple[list[dict], dict[str, str]]:
    """GEMM-like tile configs (keys BM, BN, BK, stages, …) that cannot win an m×n×k problem, dropped before
    compiling. Two sound rules: shared memory stages·(BM·BK + BK·BN)·elem_bytes above the device's per-block
    limit cannot launch; and a config is dominated by another that equals it in every key except tile sizes,
    where each of its tiles is the same or smaller but still covers the problem's padded size (next power of
    two) — the larger tile only adds masked work on the same grid. Returns (kept, {config text: why});
    never drops every config."""
    dims = {"BM": _pow2_at_least(m), "BN": _pow2_at_least(n), "BK": _pow2_at_least(k)}
    text = lambda cfg: ",".join(f"{key}={cfg[key]}" for key in sorted(cfg))

    def dominated_by(a: dict, b: dict) -> bool:
        if a is b or {x: v for x, v in a.items() if x not in dims} != {x: v for x, v in b.items() if x not in dims}:
            return False
        if not all(key in a and key in b for key in dims):
            return False
        smaller = [key for key in dims if b[key] < a[key]]
        return bool(smaller) and all(b[key] == a[key] or dims[key] <= b[key] < a[key] for key in dims)
    kept, dropped = [], {}
    for cfg in configs:
        smem = cfg.get("stages", 1) * (cfg.get("BM", 0) * cfg.get("BK", 0) + cfg.get("BK", 0) * cfg.get("BN", 0)) * elem_bytes
        better = next((b for b in configs if dominated_by(cfg, b)), None)
        if smem_limit is not None and smem > smem_limit:
            dropped[text(cfg)] = f"needs {smem} B of shared memory, the device has {smem_limit} B"
        elif better is not None:
            dropped[text(cfg)] = (f"tiles exceed the problem ({m}×{n}×{k}); {text(better)} covers it with less "
                                  "masked work")
        else:
            kept.append(cfg)
    if not kept:
        return list(configs), {}
    return kept, dropped


def prune_block_configs(configs: list[dict], n: int) -> tuple[list[dict], dict[str, str]]:
    """Elementwise configs (keys BLOCK, warps, and variant switches) that cannot win on a tensor of `n` elements,
    dropped before compiling. Among configs equal in every key but BLOCK and warps whose BLOCK ≥ n (the whole
    tensor in one program), Triton gives each thread BLOCK / (32·warps) consecutive elements, so only
    ⌈n / that⌉ threads have work: one with fewer elements per thread (more threads working), or as many and a
    smaller BLOCK (fewer masked lanes), runs the same single program at least as fast. Returns (kept,
    {config text: why}); never drops every config."""
    text = lambda cfg: ",".join(f"{key}={cfg[key]}" for key in sorted(cfg))
    per_thread = lambda cfg: cfg["BLOCK"] / (32 * cfg.get("warps", 4))
    rest = lambda cfg: {k: v for k, v in cfg.items() if k not in ("BLOCK", "warps")}
    one_program = [c for c in configs if "BLOCK" in c and c["BLOCK"] >= n > 0]
    kept, dropped = [], {}
    for cfg in configs:
        better = next((b for b in one_program if b is not cfg and cfg in one_program and rest(b) == rest(cfg) and
                       (per_thread(b), b["BLOCK"]) < (per_thread(cfg), cfg["BLOCK"])), None)
        if better is None:
            kept.append(cfg)
        else:
            dropped[text(cfg)] = (f"one program covers the {n} elements; {text(better)} does too with "
                                  f"{per_thread(better):g} elements per thread instead of {per_thread(cfg):g}")
    return (kept, dropped) if kept else (list(configs), {})
