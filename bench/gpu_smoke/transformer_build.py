"""GPU smoke (issue 15.3, "a tiny 2-layer transformer under 5 s"): cold fp16 builds of two 2-layer BERTs on CUDA,
each in a fresh process with fresh TFG_CACHE_DIR and TRITON_CACHE_DIR (build_time.cold_build), batch 1:

- tiny_bert: bench/zoo.py's stand-in (hidden 32, 2 heads, seq 16);
- bert2_base: BERT-base width (hidden 768, 12 heads, FFN 3072, seq 128) with 2 layers — the size of the 2-layer
  BERT whose cold build took 56 s when the issue was filed.

Prints where each build's time goes (build_time.describe) and one check per model: PASS when the build takes
under 5 s and the engine's output has cosine >= 0.999 to onnxruntime fp32 on a token-id input (so a fast build
of a wrong engine fails). With TRANSFORMER_BUILD_AB=1 each model is also built four more times, alternating
TFG_COMPILE_PRESTART=0 and =1 (fresh caches each time): what pre-starting the compile workers at the start of a cold
build saves, in the same run (about 1 min of device time per model; H100 at 84e5f4c: on ÷ off 0.67 and 0.69,
bench/results/transformer-build-nvidia-h100-80gb-hbm3.txt).

    PYTHONPATH=. python3 bench/gpu_smoke/transformer_build.py        (TRANSFORMER_BUILD_WORKERS=8 by default)
"""

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_time  # noqa: E402  (the sibling smoke: cold_build, describe)

LIMIT_S, MIN_COSINE = 5.0, 0.999


def two_layer_bert_base():
    import transformers
    from bench import zoo
    cfg = transformers.BertConfig(num_hidden_layers=2)
    return zoo.LastHidden(transformers.BertModel(cfg, add_pooling_layer=False).eval()).eval()


def main() -> int:
    sys.path.insert(0, os.getcwd())
    import torch
    from bench import zoo
    workers = int(os.environ.get("TRANSFORMER_BUILD_WORKERS", "8"))
    torch.manual_seed(0)
    cases = [("tiny_bert", "tiny_bert", zoo.make("tiny_bert"), 16, zoo.VOCAB["TinyBert"]),
             ("bert2_base", "bert_base_seq128", two_layer_bert_base(), 128, zoo.VOCAB["BertModel"])]
    failed = False
    with tempfile.TemporaryDirectory() as root:
        for label, zoo_name, module, seq, vocab in cases:
            data, exporter = zoo.export(zoo_name, module)
            path = os.path.join(root, f"{label}.onnx")
            with open(path, "wb") as f:
                f.write(data)
            r = build_time.cold_build(path, workers, os.path.join(root, label), shape=(1, seq), vocab=vocab)
            ab = {}
            for k, flag in enumerate(["0", "1", "0", "1"] if os.environ.get("TRANSFORMER_BUILD_AB") == "1" else []):
                os.environ["TFG_COMPILE_PRESTART"] = flag
                ab.setdefault(flag, []).append(build_time.cold_build(
                    path, workers, os.path.join(root, f"{label}-ab{k}"), shape=(1, seq), vocab=vocab)["build_s"])
            if ab:
                os.environ.pop("TFG_COMPILE_PRESTART")
                print(f"{label}: pre-start off {ab['0']} s, on {ab['1']} s (cold builds, alternating; mean on ÷ off "
                      f"{sum(ab['1']) / max(sum(ab['0']), 1e-9):.3f})", flush=True)
            print(f"{label} ({exporter}): " + build_time.describe(workers, r), flush=True)
            ok = r["build_s"] < LIMIT_S and r["cosine_vs_ort"] >= MIN_COSINE
            print(f"{'PASS' if ok else 'FAIL'} cold_build_{label} {r['build_s']:.2f} s (target < {LIMIT_S:.0f} s), "
                  f"cosine {r['cosine_vs_ort']:.5f} (>= {MIN_COSINE})", flush=True)
            failed |= not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
