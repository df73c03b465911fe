"""Which GPU kernels run, and for how long: tensorforge's engine against torch.compile, kernel by kernel.

    PYTHONPATH=. python3 bench/kernel_profile.py --models vit_b_16,gpt2_seq128 --batches 1,32 --out DIR

For each zoo case (fp16): the engine (captured in its CUDA graph, as the benchmark runs it) and torch.compile
captured in a CUDA graph are each replayed `--iters` times under torch.profiler (CUPTI reports the kernels of a
graph replay). Per runner it reports kernels per inference, the summed kernel time per inference (GPU busy time),
the wall time per inference (CUDA events), their difference (gaps between kernels: launch latency inside the graph),
and the kernels grouped by name with their share. For the engine, every layer's tactic is listed too.
Writes <out>/kernel-profile.json and .md; no downloads.
"""

import argparse
import json
import os
import sys
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from measure import mean_ms  # noqa: E402


def kernel_table(fn, iters: int) -> dict:
    """`fn` (a graph replay, or anything that launches kernels) run `iters` times under torch.profiler: kernels per
    call, summed kernel µs, wall µs (CUDA events), their gap, and the 25 kernels with the most time. Also the
    kernel profile of the precision rows (precision_case.py)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    wall_us = mean_ms(fn, iters) * 1000
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    kernels: dict[str, list[float]] = defaultdict(list)
    for ev in prof.events():
        if ev.device_type == torch.autograd.DeviceType.CUDA and not ev.name.startswith(("Memcpy", "Memset")):
            kernels[ev.name].append(ev.device_time)
    count = sum(len(v) for v in kernels.values()) / iters
    busy = sum(sum(v) for v in kernels.values()) / iters
    rows = sorted(({"kernel": k[:120], "per_inference": len(v) / iters, "us": sum(v) / iters}
                   for k, v in kernels.items()), key=lambda r: -r["us"])
    return {"wall_us": round(wall_us, 1), "kernel_us": round(busy, 1), "gap_us": round(wall_us - busy, 1),
            "kernels": count, "top": [{k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}
                                      for r in rows[:25]]}


def profile_case(name: str, batch: int, iters: int) -> dict:
    import copy
    import torch
    import tensorforge as tfg
    from tensorforge.runtime import ExecutionContext
    import zoo
    from peers import capture

    module = zoo.make(name)
    onnx_bytes, _ = zoo.export(name, module)
    x_cpu = zoo.example(name, batch)
    engine = tfg.build(onnx_bytes, fp16=True, shapes={"input": tuple(x_cpu.shape)}, device="cuda")
    ctx = ExecutionContext(engine.data, "cuda")
    x = x_cpu.cuda()
    bound = ctx.bind_inputs({"input": x})
    out = {"model": name, "batch": batch,
           "tactics": dict(Counter(f"{layer.op}:{layer.tactic}" for layer in engine.data.layers
                                   if layer.placement != "host")),
           "tensorforge": kernel_table(lambda: ctx.run(bound, copy_outputs=False), iters)}
    model = copy.deepcopy(module).cuda().half()
    xp = x.half() if x.is_floating_point() else x
    compiled = torch.compile(model)

    def comp():
        with torch.inference_mode():
            return compiled(xp)
    for _ in range(3):
        comp()
    out["compile+graph"] = kernel_table(capture(comp), iters)
    torch._dynamo.reset()
    return out


def to_markdown(rows: list[dict]) -> str:
    lines = ["# Kernel profile: tensorforge vs torch.compile + CUDA graph (fp16)", ""]
    for r in rows:
        if "error" in r:
            lines += [f"## {r['model']} b{r['batch']}: {r['error']}", ""]
            continue
        lines += [f"## {r['model']} b{r['batch']}", "", "| runner | wall µs | kernel µs | gaps µs | kernels |",
                  "| --- | --- | --- | --- | --- |"]
        for k in ("tensorforge", "compile+graph"):
            t = r[k]
            lines.append(f"| {k} | {t['wall_us']} | {t['kernel_us']} | {t['gap_us']} | {t['kernels']:.0f} |")
        for k in ("tensorforge", "compile+graph"):
            lines += ["", f"{k}, top kernels (µs per inference, launches per inference):", ""]
            lines += [f"- {t['us']:.1f} µs ×{t['per_inference']:.0f} `{t['kernel']}`" for t in r[k]["top"][:15]]
        lines += ["", "tensorforge tactics: " + ", ".join(f"{k} ×{v}" for k, v in sorted(r["tactics"].items())), ""]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", default="mobilenet_v3_large,vit_b_16")
    p.add_argument("--batches", default="1,32")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--out", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    import torch
    from tensorforge.util import log as tflog
    tflog.set_severity(tflog.Severity.WARNING)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    rows = []
    for name in args.models.split(","):
        for b in (int(s) for s in args.batches.split(",")):
            try:
                rows.append(profile_case(name, b, args.iters))
            except Exception as e:  # noqa: BLE001 - recorded, the next case runs
                rows.append({"model": name, "batch": b, "error": f"{type(e).__name__}: {str(e)[:300]}"})
            r = rows[-1]
            print(name, b, {k: {kk: r[k][kk] for kk in ("wall_us", "kernel_us", "kernels")}
                            for k in ("tensorforge", "compile+graph") if k in r} or r.get("error"), flush=True)
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "kernel-profile.json"), "w") as f:
                json.dump(rows, f, indent=1)
            with open(os.path.join(args.out, "kernel-profile.md"), "w") as f:
                f.write(to_markdown(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
