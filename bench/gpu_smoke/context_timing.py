"""GPU smoke (issue 15.1, "timing candidates in their network context"): the same fp16 engine built with and
without network-context timing (builder/context_timing.py), run in one process and timed in alternation.

For each case: both engines' CUDA-graph replays, 40 rounds × 20 replays alternating A/B, median per replay; the
swaps the context step kept, its trials and seconds; and a check per case — PASS when the context engine is not
slower than the layer-by-layer one by more than 1 % (the step only keeps swaps that timed faster in the network, so
a slower engine means the in-build measurement misled it) and both engines agree with onnxruntime fp32
(cosine ≥ 0.999). A case where no swap was kept says so (nothing to compare but noise).

    PYTHONPATH=. python3 bench/gpu_smoke/context_timing.py [model:batch ...]   (default mobilenet_v3_large:1
                                                                              efficientnet_b0:1 resnet50:1 vit_b_16:32)
"""

import os
import sys
import time
from statistics import median

MAX_SLOWER, MIN_COSINE = 1.01, 0.999


def timed_pair(run_a, run_b, rounds: int = 40, reps: int = 20) -> tuple[float, float]:
    """Median over `rounds` of the mean ms of `reps` calls, A and B alternating round by round."""
    from bench.measure import mean_ms
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(mean_ms(run_a, reps))
        tb.append(mean_ms(run_b, reps))
    return median(ta), median(tb)


def main(argv) -> int:
    sys.path.insert(0, os.getcwd())
    cases = argv or ["mobilenet_v3_large:1", "efficientnet_b0:1", "resnet50:1", "vit_b_16:32"]
    failed = False
    for case in cases:
        try:
            failed |= not one_case(case)
        except Exception as e:  # noqa: BLE001 - one broken case is reported, the others still run
            print(f"FAIL context_timing_{case}: {type(e).__name__}: {e}", flush=True)
            failed = True
    return 1 if failed else 0


def one_case(case: str) -> bool:
    import numpy as np
    import torch
    import tensorforge as tfg
    from tensorforge.api.high_level import _as_profile
    from tensorforge.builder import BuilderConfig
    from bench import zoo
    from bench.accuracy import cosine
    import onnxruntime as ort
    name, batch = case.split(":")[0], int(case.split(":")[1])
    torch.manual_seed(0)
    module = zoo.make(name)
    data, _ = zoo.export(name, module)
    shape = zoo.input_shape(name, batch)
    x = zoo.example(name, batch, seed=1).numpy()
    input_name = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {input_name: x})[0]
    engines, info = {}, {}
    for label, on in (("layer", False), ("context", True)):
        t0 = time.perf_counter()
        config = BuilderConfig(fp16=True, profiles=_as_profile({input_name: shape}), device="cuda",
                               context_timing=on)
        engines[label] = tfg.build(data, config=config, device="cuda")
        info[label] = (time.perf_counter() - t0, engines[label].data.build_info["tactics"].get("context", {}))
    xd = torch.from_numpy(x).cuda()
    runs = {k: (lambda e=e: e.context.run({input_name: xd}, copy_outputs=False)) for k, e in engines.items()}
    cos = {}
    for k, e in engines.items():
        got = e.run({input_name: xd})
        y = next(iter(got.values()))
        cos[k] = cosine(np.asarray(y.float().cpu() if hasattr(y, "float") else y, dtype=np.float32), want)
    t_layer, t_ctx = timed_pair(runs["layer"], runs["context"])
    ctx = info["context"][1]
    kept = ctx.get("kept", [])
    ok = t_ctx <= MAX_SLOWER * t_layer and min(cos.values()) >= MIN_COSINE
    print(f"{name} b{batch}: layer-by-layer {t_layer:.4f} ms, context {t_ctx:.4f} ms (ratio {t_ctx / t_layer:.3f}); "
          f"builds {info['layer'][0]:.1f} / {info['context'][0]:.1f} s; context step: {ctx.get('groups', 0)} close "
          f"call group(s), {ctx.get('trials', 0)} timed, {len(kept)} kept, {ctx.get('seconds', 0)} s, in-build "
          f"{ctx.get('base_ms')} -> {ctx.get('final_ms')} ms{'; skipped: ' + ctx['skipped'] if ctx.get('skipped') else ''}",
          flush=True)
    for k in kept:
        print(f"   kept: {k['swap']}, {len(k['layers'])} layer(s) from {k['layers'][0]} (saved {k['saved_ms']} ms)")
    print(f"{'PASS' if ok else 'FAIL'} context_timing_{name}_b{batch} ratio {t_ctx / t_layer:.3f} (<= {MAX_SLOWER}), "
          f"cosine {cos['layer']:.5f} / {cos['context']:.5f} (>= {MIN_COSINE})"
          + ("" if kept else " [no swap kept: the two engines are the same]"), flush=True)
    del engines, runs
    torch.cuda.empty_cache()
    return ok


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
