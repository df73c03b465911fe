"""Tree-ensemble speed: tensorforge vs onnxruntime on a 100-tree random forest and a 500-tree gradient-boosting model
(scikit-learn on the breast-cancer dataset, converted by skl2onnx, zipmap off), same thread count for both.

    PYTHONPATH=. python bench/trees.py                    # CPU, batch 1 and 1000, every tree tactic + the chosen one
    PYTHONPATH=. python bench/trees.py --device cuda      # GPU engine at batch 100000 (onnxruntime CPU alongside)

The two runtimes are timed apart in alternating blocks (ours, theirs, ours, …; median of per-call times over the
blocks), never back to back in one loop. Outputs are compared first (labels exact, probabilities rtol 1e-5).
Prints a markdown table (the header gives the load average: on a shared machine, compare runs of similar load);
--out writes it to a file. `--threads 1` compares both runtimes single-threaded.
"""

import argparse
import os
import statistics
import sys
import time
import warnings

import numpy as np
import torch


def models(folder: str | None = None):
    """{name: ONNX bytes}, breast-cancer features. With `folder`: read them from there when a previous call wrote
    them (a machine without scikit-learn/skl2onnx, like the GPU host, gets them carried from one that has them),
    else train, convert and write them there."""
    names = ("random forest, 100 trees", "gradient boosting, 500 trees")
    files = {n: os.path.join(folder, n.split(",")[0].replace(" ", "_") + ".onnx") for n in names} if folder else {}
    if folder and all(os.path.exists(f) for f in files.values()) and os.path.exists(os.path.join(folder, "x.npy")):
        return ({n: open(f, "rb").read() for n, f in files.items()}, np.load(os.path.join(folder, "x.npy")))
    from sklearn.datasets import load_breast_cancer
    from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
    from skl2onnx import to_onnx
    x, y = load_breast_cancer(return_X_y=True)
    x = x.astype(np.float32)
    out = {}
    for name, est in ((names[0], RandomForestClassifier(n_estimators=100, random_state=0)),
                      (names[1], GradientBoostingClassifier(n_estimators=500, random_state=0))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(x, y)
            onx = to_onnx(est, x[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3})
        out[name] = onx.SerializeToString()
    if folder:
        os.makedirs(folder, exist_ok=True)
        for n, f in files.items():
            with open(f, "wb") as fh:
                fh.write(out[n])
        np.save(os.path.join(folder, "x.npy"), x)
    return out, x


def timed_blocks(fns: dict, blocks: int, per_block: float) -> dict:
    """Median per-call seconds of each fn, measured in alternating blocks of ~per_block seconds."""
    for f in fns.values():
        f()
    samples = {k: [] for k in fns}
    for _ in range(blocks):
        for k, f in fns.items():
            n, t0 = 0, time.perf_counter()
            while True:
                f()
                n += 1
                el = time.perf_counter() - t0
                if el >= per_block:
                    break
            samples[k].append(el / n)
    return {k: statistics.median(v) for k, v in samples.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batches", default=None, help="comma list (default 1,1000 on CPU, 100000 on CUDA)")
    ap.add_argument("--blocks", type=int, default=None, help="alternating blocks (default 5 on CPU, 3 on CUDA)")
    ap.add_argument("--block-seconds", type=float, default=0.3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import onnxruntime as ort

    import tensorforge as tfg
    from tensorforge.api.high_level import parse
    from tensorforge.kernels import candidates, instantiate

    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if args.blocks is None:
        args.blocks = 3 if dev.type == "cuda" else 5        # CUDA: onnxruntime takes seconds per 100k-row call
    batches = [int(b) for b in (args.batches or ("100000" if dev.type == "cuda" else "1,1000")).split(",")]
    onnx_models, data = models()
    rows = ["| model | batch | tensorforge tactic | tensorforge ms | onnxruntime ms | speed-up |", "|---|---|---|---|---|---|"]
    failed = False
    for name, onx in onnx_models.items():
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = args.threads
        opts.inter_op_num_threads = 1
        sess = ort.InferenceSession(onx, opts, providers=["CPUExecutionProvider"])
        for batch in batches:
            x = np.resize(data, (batch, data.shape[1])).astype(np.float32)
            t0 = time.perf_counter()
            eng = tfg.build(onx, device=args.device, shapes={"X": ((1, x.shape[1]), x.shape, x.shape)})
            build_s = time.perf_counter() - t0
            xt = torch.from_numpy(x).to(dev)
            want = sess.run(None, {"X": x})
            got = eng.run({"X": xt})
            labels, probs = (got[k].cpu().numpy() for k in eng.output_names)
            ok = np.array_equal(labels, want[0]) and np.allclose(probs, want[1], rtol=1e-5, atol=1e-5)
            failed |= not ok
            print(f"{'PASS' if ok else 'FAIL'} {name} batch {batch}: outputs vs onnxruntime (build {build_s:.1f} s)")
            layer_tactic = next(la.tactic for la in eng.data.layers if la.op.startswith("TreeEnsemble"))

            def ours():
                eng.run({"X": xt})
                if dev.type == "cuda":
                    torch.cuda.synchronize()

            fns = {"ours": ours, "ort": lambda: sess.run(None, {"X": x})}
            if dev.type == "cpu":          # each tree tactic on its own, through the kernel registry
                layer = next(la for la in parse(onx).layers if la.op.startswith("TreeEnsemble"))
                for tac, cfg in candidates(layer, dev)[0]:
                    k = instantiate(tac.id(cfg), layer, dev)
                    fns[tac.id(cfg)] = (lambda k=k: k([xt]))
            t = timed_blocks(fns, args.blocks, args.block_seconds)
            rows.append(f"| {name} | {batch} | {layer_tactic} (engine) | {t['ours'] * 1e3:.3f} | {t['ort'] * 1e3:.3f} | "
                        f"{t['ort'] / t['ours']:.2f}× |")
            for k, v in t.items():
                if k not in ("ours", "ort"):
                    rows.append(f"| {name} | {batch} | {k} (kernel alone) | {v * 1e3:.3f} | {t['ort'] * 1e3:.3f} | "
                                f"{t['ort'] / v:.2f}× |")
    table = "\n".join(rows)
    load = " / ".join(f"{v:.1f}" for v in os.getloadavg())
    header = (f"device {args.device}, {args.threads} threads (torch.set_num_threads and onnxruntime intra_op), "
              f"{args.blocks} alternating blocks of {args.block_seconds} s, median per call; load average at the end "
              f"{load} (1/5/15 min) on {os.cpu_count()} cores\n\n")
    print(header + table)
    if args.out:
        with open(args.out, "w") as f:
            f.write(header + table + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
