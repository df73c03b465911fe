"""Where TF32 applies in a built engine, for `inspect` and `compare` (the build log says it at build time:
builder.tf32_note).

TF32 (trtexec's default, `tf32=True`) lets the fp32 products of matmul/convolution layers on CUDA use tensor
cores with 10-bit mantissas: each product carries a relative error up to 2⁻¹¹ instead of 2⁻²⁴, and deep networks
accumulate it (resnet50 on the H200: 2.3e-2 of the output's maximum). Other layers and other precisions are
unaffected. Entry point: `tf32_state(engine_data) -> {"allowed", "applies", "layers", "note"}`.
"""

TF32_OPS = frozenset({"Conv", "ConvTranspose", "FusedConv", "GatedConv", "FusedConvPool", "MatMul", "Gemm", "MatMulEpilogue", "TwoLayerMLP",
                      "Attention", "Einsum", "SparseGemm"})


def tf32_layers(engine_data) -> list[str]:
    """Names of the engine's fp32 layers whose products TF32 would round (on CUDA, with TF32 allowed)."""
    return [la.name for la in engine_data.layers
            if la.op in TF32_OPS and la.precision in ("float32", "fp32") and la.placement != "host"]


def tf32_state(engine_data) -> dict:
    info = engine_data.build_info or {}
    allowed = "noTF32" not in info.get("flags", [])
    on_cuda = str(info.get("device", "")).startswith("cuda")
    layers = tf32_layers(engine_data)
    applies = allowed and on_cuda and bool(layers)
    if applies:
        note = (f"TF32 on for {len(layers)} fp32 matmul/conv layer(s) (trtexec's default): products carry 10-bit "
                "mantissas, expect errors up to ~1e-2 of an output's maximum against fp32; rebuild with --noTF32 "
                "(tf32=False) for fp32 accuracy")
    elif not allowed:
        note = "TF32 off (--noTF32): fp32 layers compute in IEEE fp32"
    elif not on_cuda:
        note = "TF32 does not apply: built for the CPU (fp32 products are IEEE fp32)"
    else:
        note = "TF32 does not apply: no fp32 matmul/conv layers"
    return {"allowed": allowed, "applies": applies, "layers": len(layers), "note": note}
