"""GPU diagnosis (issue 15.5): why the dynamic BERT engine misses 1.05× of the static one at min and max.

    PYTHONPATH=. python3 bench/gpu_smoke/dynamic_diag.py [model]      (H200: ~60 s for bert_base_seq128)

Builds the zoo model's dynamic engine (bench/dynamic_case.py's profile) and a static engine at each profile
point, then prints per point: both engines' CUDA-graph medians, the layers whose (tactic, config) differ between
the two engines, and each engine's kernel profile under the graph (kernels per inference, busy and gap µs, the
kernels that differ in time by most). Nothing is asserted: it says where the difference is.
"""
import os
import sys
import tempfile

sys.path.insert(0, ".")
sys.path.insert(0, "bench")
import tensorforge as tfg  # noqa: E402
from tensorforge.runtime import ExecutionContext  # noqa: E402

import zoo  # noqa: E402
from dynamic_case import _example, points  # noqa: E402
from kernel_profile import kernel_table  # noqa: E402
from measure import timer  # noqa: E402
from zoo_case import engine_runner  # noqa: E402


DEVICE = os.environ.get("DIAG_DEVICE", "cuda")     # cpu: a quick check of the script itself (no kernel profile)


def main() -> int:
    name = sys.argv[1] if len(sys.argv) > 1 else "bert_base_seq128"
    data, _ = zoo.export(name, zoo.make(name).eval(), dynamic_seq=zoo.ZOO[name].family != "vision")
    pts = points(name)
    with tempfile.TemporaryDirectory() as tmp:
        cache = os.path.join(tmp, "timing.json")
        dyn = tfg.build(data, fp16=True, shapes={"input": (pts["min"], pts["opt"], pts["max"])}, device=DEVICE,
                        timing_cache=cache)
        dctx = ExecutionContext(dyn.data, DEVICE)
        time_fn = timer(DEVICE, 200, 20)
        for point, shape in pts.items():
            static = tfg.build(data, fp16=True, shapes={"input": shape}, device=DEVICE, timing_cache=cache)
            sctx = ExecutionContext(static.data, DEVICE)
            x = _example(name, shape).to(DEVICE)
            rd, rs = engine_runner(dctx, x, DEVICE), engine_runner(sctx, x, DEVICE)
            td, ts = time_fn(rd)["median_ms"], time_fn(rs)["median_ms"]
            print(f"== {point} {shape}: dynamic {td:.4f} ms, static {ts:.4f} ms, ratio {td / ts:.3f}; layers "
                  f"{len(dyn.data.layers)} / {len(static.data.layers)}")
            sl = {layer.name: layer.tactic for layer in static.data.layers}
            differ = [(layer.name, layer.tactic, sl.get(layer.name)) for layer in dyn.data.layers
                      if sl.get(layer.name) != layer.tactic]
            print(f"   {len(differ)} layers with another tactic (dynamic → static):")
            for lname, a, b in differ[:30]:
                print(f"     {lname}: {a} → {b}")
            if DEVICE != "cuda":
                continue
            kd, ks = kernel_table(rd, 20), kernel_table(rs, 20)
            for label, k in (("dynamic", kd), ("static", ks)):
                print(f"   {label}: {k['kernels']:.0f} kernels, busy {k['kernel_us']} µs, gaps {k['gap_us']} µs, "
                      f"wall {k['wall_us']} µs")
            topd = {r["kernel"]: r["us"] for r in kd["top"]}
            tops = {r["kernel"]: r["us"] for r in ks["top"]}
            delta = sorted(set(topd) | set(tops), key=lambda k: -abs(topd.get(k, 0) - tops.get(k, 0)))
            for k in delta[:8]:
                print(f"     {topd.get(k, 0):8.1f} vs {tops.get(k, 0):8.1f} µs  {k[:100]}")
            del sctx, static
    return 0


if __name__ == "__main__":
    sys.exit(main())
