"""Wall-time estimates of the benchmark's cases on the H200, so a run can be cut into commands that fit the device
budget (`run.py --plan` prints the plan and its total without running anything; a run skips a case whose estimate
no longer fits `--budget-s` and lists it under "Not run").

Anchors (bench/results at f8fd446, 95b9826): fp16 engine builds with a cold timing cache, per model, at batch 1 and
32 (BUILD_S; fp32 builds ≈ 1.2×); one zoo case without builds ≈ 14 s with one torch.compile (export amortised).
Assumed, to be re-fitted from the `elapsed_s` every row now records: each torch.compile ≈ COMPILE_S[model],
max-autotune-no-cudagraphs as measured at b32 (MAX_AUTOTUNE_S: resnet50 321.6 s at 14c6855, bert-base 132.8 s at
6a5da4e; others assumed as resnet50), an INT8/FP8 build ≈ 1.5× the fp16
build plus calibration, a warm-cache build ≈ 5 % of the cold one.
"""

BUILD_S = {  # model → (cold fp16 build at batch 1, at batch 32 after batch 1 of the same run), seconds
    "resnet50": (1.5, 0.7), "mobilenet_v3_large": (55.0, 45.0), "efficientnet_b0": (30.0, 20.0),
    "convnext_tiny": (30.0, 6.3), "vit_b_16": (7.8, 4.3), "bert_base_seq128": (5.4, 1.2), "gpt2_seq128": (9.0, 0.4),
    "tiny_cnn": (0.5, 0.5), "tiny_bert": (1.0, 1.0),
}
COMPILE_S = {"resnet50": 8.0, "mobilenet_v3_large": 9.0, "efficientnet_b0": 10.0, "convnext_tiny": 8.0,
             "vit_b_16": 8.0, "bert_base_seq128": 8.0, "gpt2_seq128": 10.0}
EXPORT_S = {"vit_b_16": 6.0, "bert_base_seq128": 6.0, "gpt2_seq128": 15.0}
ORT_B32_S = {"vit_b_16": 4.0, "bert_base_seq128": 2.5, "gpt2_seq128": 2.5, "convnext_tiny": 1.5}
MAX_AUTOTUNE_S = {"resnet50": 322.0, "bert_base_seq128": 133.0}     # seconds of compile, cold caches
GELU_S, OVERHEAD_S = 25.0, 20.0          # GELU case (both dtypes); process start, imports, CUDA context


def build_s(model: str, batch: int, dtype: str = "fp16") -> float:
    b1, b32 = BUILD_S.get(model, (20.0, 10.0))
    t = b1 if batch == 1 else b32 if batch <= 32 else b32 * 1.5
    return t * (1.2 if dtype == "fp32" else 1.0)


# a prewarmed run (bench/prewarm.py): compiles hit warm caches — what is left is dynamo's tracing, lowering and the
# autotuning run here (assumed ≈ 35 % of a cold compile), and our builds keep only their tactic timing (≈ 40 %)
WARM_COMPILE, WARM_BUILD = 0.35, 0.4


def zoo_case_s(model: str, batch: int, dtype: str, peers: list[str], max_autotune: bool, prebuilt: bool = False,
               warm: bool = False, backend: bool = False) -> float:
    """`prebuilt`: the engine comes from the build-cost case (batch 1, fp16); `warm`: a prewarmed run;
    `backend`: the row also times torch.compile(backend="tensorforge") (dynamo + one more build)."""
    compiles = int("compile" in peers or "compile+graph" in peers) + int("freeze+graph" in peers)
    cf, bf = (WARM_COMPILE, WARM_BUILD) if warm else (1.0, 1.0)
    t = (0.0 if prebuilt else bf * build_s(model, batch, dtype)) + 5.0 + cf * compiles * COMPILE_S.get(model, 10.0)
    if backend:
        t += 3.0 + bf * build_s(model, batch, dtype)
    t += ORT_B32_S.get(model, 1.0) if batch > 1 else 0.5
    if dtype == "fp32":
        t += bf * build_s(model, batch, dtype) + 1.0     # the TF32-off accuracy engine
    if max_autotune:
        t += (0.25 if warm else 1.0) * MAX_AUTOTUNE_S.get(model, MAX_AUTOTUNE_S["resnet50"])
    return t


def build_cost_s(model: str, warm: bool = False) -> float:
    """Cold build (then the b1 row's engine) + the warm rebuild."""
    return 1.05 * (WARM_BUILD if warm else 1.0) * build_s(model, 1) + 0.5


# measured INT8/FP8 builds (H200, bench/results at 1990f44 and this session's int8_profile smoke): resnet50's 53
# quantized convolutions time 8 tile configs each — 80–101 s for the first quantized build of a run (the Triton
# variants compile), 40 s at batch 32 after it, 20 s at 256; bert-base 20–26 s
# Refit at a1ebd6d from the H100 ZOO_PRECISION rows' elapsed_s (build + accuracy + timing + kernel profile): an
# INT8 and an FP8 row each compile their own Triton variants (the first of each kind: 32–130 s), later rows and
# other batches reuse them (19–58 s)
QUANT_BUILD_S = {"resnet50": (88.0, 40.0), "mobilenet_v3_large": (130.0, 58.0), "efficientnet_b0": (130.0, 58.0),
                 "convnext_tiny": (35.0, 25.0), "vit_b_16": (40.0, 31.0), "bert_base_seq128": (33.0, 20.0),
                 "gpt2_seq128": (40.0, 25.0)}        # (first build of its kind in a run, later ones), seconds


# onnxruntime on the device's CPU, once per model in a run (precision_case._ort_scores): fp32 outputs on the 64 test
# inputs, and its own INT8 engine (quantize_static + run) when INT8 rows run — H100 host, ZOO_PRECISION at a1ebd6d
ORT_REF_S = {"resnet50": (1.2, 6.4), "mobilenet_v3_large": (0.3, 3.7), "efficientnet_b0": (0.4, 4.5),
             "convnext_tiny": (2.1, 8.1), "vit_b_16": (6.3, 20.3), "bert_base_seq128": (4.9, 24.2),
             "gpt2_seq128": (4.7, 25.0)}


def ort_reference_s(model: str, with_int8: bool) -> float:
    fp32, int8 = ORT_REF_S.get(model, (5.0, 25.0))
    return fp32 + (int8 if with_int8 else 0.0)


def precision_s(model: str, batch: int, precision: str, same_run_fp16: bool, first_quantized: bool = False,
                warm: bool = False) -> float:
    """A precision row's seconds; `warm`: after bench/prewarm.py compiled the model's builds (a first build of a
    kind then costs what a later one does, and the fp16 build keeps only its tactic timing)."""
    if precision == "fp16":
        return (0.05 if same_run_fp16 else WARM_BUILD if warm else 1.0) * build_s(model, batch) + 2.0
    if model in QUANT_BUILD_S:
        first, later = QUANT_BUILD_S[model]
        return first if first_quantized and not warm else later
    return 1.5 * build_s(model, batch) + 6.0


def dynamic_s(model: str) -> float:
    return 3 * build_s(model, 32) + build_s(model, 1) + 6.0


def export_s(model: str) -> float:
    return EXPORT_S.get(model, 3.0)


def fmt(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 90 else f"{seconds:.0f} s"
