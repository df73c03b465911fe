"""The CPU table of BENCH.md:  PYTHONPATH=. python bench/cpu.py  — tensorforge against onnxruntime's CPU provider,
both on 2 threads, on small models built here (nothing downloaded): the seed GELU graph, an MLP, a small CNN and a
tiny BERT (when transformers is installed). Median of ≥ 30 wall-clock runs after warm-up, p10–p90 spread, and each
engine's max abs difference from onnxruntime. Writes bench/results/cpu-<machine>.json and .md.
"""

import argparse
import io
import json
import os
import platform
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402
import torch  # noqa: E402

from measure import cpu_times, stats  # noqa: E402

THREADS = 2


def _export(module, x, opset, names=("input", "output")) -> bytes:
    buf = io.BytesIO()
    torch.onnx.export(module.eval(), (x,), buf, dynamo=False, opset_version=opset, input_names=[names[0]],
                      output_names=[names[1]])
    return buf.getvalue()


def models():
    """name → (onnx bytes, numpy input)."""
    from gelu_case import SeedNet
    torch.manual_seed(0)
    out = {}
    x = torch.randn(1 << 20)
    out["gelu_seed_1M"] = (_export(SeedNet(), x, 11), x.numpy())
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
    x = torch.randn(32, 256)
    out["mlp_b32"] = (_export(mlp, x, 17), x.numpy())
    cnn = torch.nn.Sequential(torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
                              torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
                              torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(32, 10))
    x = torch.randn(1, 3, 64, 64)
    out["small_cnn_64px"] = (_export(cnn, x, 17), x.numpy())
    try:
        import transformers

        import zoo
        bert = transformers.BertModel(transformers.BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                                              intermediate_size=512), add_pooling_layer=False)
        ids = torch.randint(0, 30522, (1, 64))
        out["tiny_bert_seq64"] = (_export(zoo.LastHidden(bert.eval()), ids, 17), ids.numpy())
    except ImportError:
        pass
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    import onnxruntime as ort

    import tensorforge as tfg
    from tensorforge.runtime import ExecutionContext
    torch.set_num_threads(THREADS)
    rows = []
    for name, (onnx_bytes, x) in models().items():
        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
        sess = ort.InferenceSession(onnx_bytes, opts, providers=["CPUExecutionProvider"])
        iname = sess.get_inputs()[0].name
        want = sess.run(None, {iname: x})[0]
        engine = tfg.build(onnx_bytes, device="cpu")
        ctx = ExecutionContext(engine.data, "cpu")
        feed = {iname: torch.from_numpy(x)}
        got = ctx.run(feed)[engine.data.output_names[0]].numpy()
        ort_st = stats(cpu_times(lambda: sess.run(None, {iname: x}), args.iters, args.warmup))
        tf_st = stats(cpu_times(lambda: ctx.run(feed), args.iters, args.warmup))
        row = {"model": name, "onnxruntime": ort_st, "tensorforge": tf_st,
               "ratio": round(tf_st["median_ms"] / ort_st["median_ms"], 3),
               "max_abs_diff": float(np.abs(got.astype(np.float64) - want).max()),
               "device_layers": sum(layer.placement != "host" for layer in engine.data.layers),
               "layer_ops": sorted({layer.op for layer in engine.data.layers if layer.placement != "host"})}
        rows.append(row)
        print(f"{name:<18} ort {ort_st['median_ms']:8.3f} ms  tensorforge {tf_st['median_ms']:8.3f} ms  "
              f"ratio {row['ratio']:.2f}  max|diff| {row['max_abs_diff']:.2e}", flush=True)
    res = {"environment": {"machine": platform.machine(), "processor": platform.processor(), "threads": THREADS,
                           "torch": torch.__version__, "onnxruntime": ort.__version__, "tensorforge": tfg.__version__,
                           "iters": args.iters, "warmup": args.warmup}, "rows": rows}
    os.makedirs(args.out_dir, exist_ok=True)
    stem = f"cpu-{platform.machine()}"
    with open(os.path.join(args.out_dir, f"{stem}.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = [f"# CPU: tensorforge vs onnxruntime ({THREADS} threads each, {platform.machine()})", "",
          f"Median of {args.iters} wall-clock runs after {args.warmup} warm-up; ± is the p10–p90 spread.", "",
          "| model | onnxruntime ms | tensorforge ms | tf / ort | max abs diff | engine layers |",
          "| --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        md.append(f"| {r['model']} | {r['onnxruntime']['median_ms']:.3f} ±{r['onnxruntime']['spread_pct']:.0f}% | "
                  f"{r['tensorforge']['median_ms']:.3f} ±{r['tensorforge']['spread_pct']:.0f}% | {r['ratio']:.2f} | "
                  f"{r['max_abs_diff']:.1e} | {r['device_layers']} ({', '.join(r['layer_ops'])}) |")
    with open(os.path.join(args.out_dir, f"{stem}.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
