"""kernels — implementations ("tactics") of IR ops.

Entry points: `registry.tactic` (decorator), `registry.candidates(layer)`, `registry.instantiate(tactic_id, layer)`.
A Kernel is a callable `kernel(inputs: list[Tensor | None]) -> list[Tensor]`, built once per layer and device.
Every op with an OpSpec has the generic `torch_ref` tactic (its reference run eagerly on the layer's device);
faster tactics (cuBLAS/cuDNN through torch, Triton) register beside it in one module each.
Imports ir, plugin, util.
"""

import importlib.util

from . import reference  # noqa: F401  (registers the generic tactic)
from . import subnetwork  # noqa: F401  (control-flow bodies run through kernels)
from . import plugin_tactics  # noqa: F401  (a tactic per registered plugin)
from . import conv_channels_last  # noqa: F401  (NHWC convolution on CUDA)
from . import conv_cudnn_fused  # noqa: F401  (conv + bias + residual + ReLU in one cuDNN call)
from . import triton_pointwise  # noqa: F401  (generated kernels of PointwiseChain layers)
from . import torch_fused  # noqa: F401  (SDPA, layer_norm, addmm and conv epilogues for fused ops)
from . import cublaslt_epilogue  # noqa: F401  (MatMulEpilogue: bias + ReLU/tanh-GELU in cuBLASLt's GEMM epilogue, CUDA)
from . import cpu_onednn  # noqa: F401  (CPU: oneDNN linear with packed weights and fused activations)
from . import cpu_mkl_linear  # noqa: F401  (CPU: MKL packed sgemm for MatMulEpilogue, timed against oneDNN's)
from . import cpu_gemv  # noqa: F401  (CPU: M ≤ 8 MatMulEpilogue as one MKL GEMV + one in-place activation)
from . import cpu_conv_kx1  # noqa: F401  (CPU: K×1 convolutions as conv1d along the height)
from . import cpu_conv_onednn  # noqa: F401  (CPU: oneDNN channels-last convolution, packed weights, fused epilogue)
from . import cpu_dnnl_conv  # noqa: F401  (CPU: oneDNN convolution primitives made once per shape, C API)
from . import cpu_dnnl_matmul  # noqa: F401  (CPU: oneDNN matmul primitives made once per row count, C API)
from . import cpu_dnnl_pool  # noqa: F401  (CPU: oneDNN max pooling primitive made once per shape, C API)
from . import cpu_shape_ops  # noqa: F401  (CPU: Reshape/Unsqueeze/Squeeze with parsed shapes kept, scalar Gather)
from . import byte_copy  # noqa: F401  (CUDA: a Reshape that copies 1-byte codes copies them 4 bytes at a time)
from . import quant_int_mm  # noqa: F401  (QuantizedMatMul/Conv: torch._int_mm, exact int32, on CUDA and CPU)
from . import fp8_scaled_mm  # noqa: F401  (QuantizedMatMul/Conv in FP8 E4M3: torch._scaled_mm on Hopper)
from . import quant_float_exact  # noqa: F401  (QuantizedConv/ConvTranspose, depthwise too: exact float32 conv)
from . import torch_rnn  # noqa: F401  (RNN/GRU/LSTM through torch's fused recurrent kernels)
from . import cpu_dnnl_rnn  # noqa: F401  (CPU: GRU/LSTM as one oneDNN RNN primitive call, C API)
from . import contrib_quant  # noqa: F401  (com.microsoft QGemm / DynamicQuantizeLSTM: torch._int_mm, exact int32)
from . import contrib_attention  # noqa: F401  (com.microsoft MultiHeadAttention / GroupQueryAttention: SDPA)
from . import sparse_gemm  # noqa: F401  (SparseGemm: 2:4 semi-structured sparse GEMM on CUDA, dense elsewhere)
from . import trees_traverse, trees_gemm  # noqa: F401,E401  (tree ensembles: level traversal, GEMM form)
from .gated_conv import derive_mul_first  # noqa: E402  (GatedConv: the gate Mul, then each FusedConv tactic)
from .mlp_pair import derive_pairs  # noqa: E402  (TwoLayerMLP: two launches of each MatMulEpilogue tactic)


def _derive() -> None:
    """The fused ops' tactics made from their parts' tactics (registry.derive): after every tactic load."""
    derive_mul_first()
    derive_pairs()


_derive()
from .registry import optional_tactics  # noqa: E402


@optional_tactics      # imported on first need (registry.optional_tactics): a CPU engine loads and runs without Triton
def _triton_tactics() -> None:
    if importlib.util.find_spec("triton") is None:   # the optional 'gpu' extra: hand-written Triton kernels
        return
    from . import triton_attention, triton_gemm, triton_layernorm, triton_softmax  # noqa: F401
    from . import triton_conv_epilogue, triton_pool  # noqa: F401  (conv + one epilogue kernel; GlobalAveragePool)
    from . import triton_add_layernorm  # noqa: F401  (residual Add + LayerNorm, one kernel)
    from . import triton_conv_pool  # noqa: F401  (conv epilogue that also averages its output)
    from . import triton_depthwise  # noqa: F401  (depthwise conv + bias/activation/residual: one kernel)
    from . import triton_gemm_splitk  # noqa: F401  (few-tile GEMMs split along K, partials summed in order)
    from . import triton_conv1x1  # noqa: F401  (1×1 conv + epilogue as one GEMM on channels-last rows)
    from . import triton_int8_gemm  # noqa: F401  (QuantizedMatMul/Conv: int8/fp8 tl.dot + requantize epilogue)
    from . import quant_pointwise  # noqa: F401  (Q/DQ layers run as written: float arithmetic, one-pass Triton)
    from . import trees_triton  # noqa: F401  (tree ensembles: one-launch Triton walker)
    from . import quant_w4_triton  # noqa: F401  (BlockQuantizedMatMul: int4 weights dequantized in registers)
    from . import triton_maxpool  # noqa: F401  (MaxPool on fp16/bf16/fp32: one Triton pass, NHWC out)
    from . import quant_maxpool  # noqa: F401  (MaxPool on int8/uint8 codes: one Triton pass, NHWC out)
    from . import triton_gated_conv1x1  # noqa: F401  (GatedConv 1×1: the squeeze-excite gate scales A as it loads)
    from . import triton_mlp2  # noqa: F401  (TwoLayerMLP: a squeeze-excite MLP in one launch)
    _derive()               # GatedConv / TwoLayerMLP wrappers of the tactics above
from .registry import Kernel, Tactic, candidates, instantiate, tactic

__all__ = ["Kernel", "Tactic", "candidates", "instantiate", "tactic"]
