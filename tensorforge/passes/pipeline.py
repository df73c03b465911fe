"""The ordered lists of passes, by builder optimisation level (0 = none … 5 = all).

`optimize(net, shape_points, level)` runs every pass of `PASSES` whose minimum level ≤ `level`, in order,
and returns {pass name: changes made}. `optimize(..., stage="late")` runs `LATE_PASSES`: the builder calls
it after precision conversion, because grouping pointwise chains needs the final dtypes (the generated
kernel's loads, stores and casts depend on them, and the entry/exit Casts of --fp16 join the chains).
Options reach every pass as keywords: `max_fold_elements`, and `rejections` (a list that collects every
fusion rule's rejection with its reason; the same reasons are logged at --verbose).
"""

from typing import Callable

from ..ir import Network
from ..util.log import get_logger
from .constant_fold import fold_constants
from .cse import eliminate_common_subexpressions
from .dead_code import remove_dead_layers
from .subgraphs import inline_constant_ifs, optimize_bodies
from .rules import activations, attention, conv_as_gemm, conv_bn, epilogue, gather_view, gelu, gemm_reshape, layernorm, pointwise, softmax
from .rules.add_layernorm import fuse_add_layernorm
from .rules.conv_bias_layernorm import move_conv_bias_into_layernorm
from .rules.conv_pool import fuse_conv_pool
from .rules.horizontal_gemm import fuse_horizontal_gemms
from .rules.identity import remove_noops
from .rules.qdq import fuse_qdq
from .rules.qdq_dual import fuse_output_quantize
from .rules.qdq_hoist import hoist_quantize
from .rules.qdq_producer import fuse_conv_quantize, fuse_producer_quantize
from .rules.qgemm_rows import keep_gemm_rows
from .rules.se_gate import fuse_se_gate
from .rules.two_layer_mlp import fuse_two_layer_mlp
from .rules.transpose_epilogue import fuse_transposed_epilogue
from .rules import qdq_epilogue
from .view_chains import collapse_view_chains
from .rules.base import rule_pass

# (name, minimum level, function(net, shape_points=..., **options) -> changes)
PASSES: list[tuple[str, int, Callable[..., int]]] = [
    ("dead-code", 0, remove_dead_layers),
    ("fuse-qdq", 1, fuse_qdq),           # before constant folding, which would turn weight DQs into float weights
    ("constant-fold", 1, fold_constants),
    ("constant-if", 1, inline_constant_ifs),   # an If whose condition folded: its taken branch, inlined
    ("dead-code", 1, remove_dead_layers),
    ("cse", 1, eliminate_common_subexpressions),
    ("no-ops", 1, remove_noops),
    ("gather-view", 2, rule_pass(*gather_view.RULES)),
    ("fuse-gelu", 2, rule_pass(*gelu.RULES)),
    ("fuse-activations", 2, rule_pass(*activations.RULES)),   # HardSwish/HardSigmoid/Mish written out
    ("fuse-softmax", 2, rule_pass(*softmax.RULES)),
    ("fuse-layernorm", 2, rule_pass(*layernorm.RULES)),
    ("fuse-qdq-epilogue", 2, qdq_epilogue.fuse_quantized_epilogues),   # what follows a quantized op, Gelu fused
    ("qdq-second-output", 1, fuse_output_quantize),   # after cse and the epilogues: one Q per tensor and scale
    ("fold-conv-bn", 2, rule_pass(*conv_bn.RULES)),
    ("fuse-attention", 3, rule_pass(*attention.RULES)),
    ("gemm-through-reshape", 3, rule_pass(*gemm_reshape.RULES)),
    ("fuse-epilogue", 3, rule_pass(*epilogue.RULES)),
    ("transposed-epilogue", 3, fuse_transposed_epilogue),   # ConvNeXt: layer scale + residual behind a Transpose
    ("point-conv-as-gemm", 3, rule_pass(*conv_as_gemm.RULES)),
    ("horizontal-gemm", 3, fuse_horizontal_gemms),
    ("view-chains", 3, collapse_view_chains),
    ("dead-code", 1, remove_dead_layers),
]

# after precision conversion (builder): dtypes are final
LATE_PASSES: list[tuple[str, int, Callable[..., int]]] = [
    ("quantize-before-views", 1, hoist_quantize),   # Q above Reshape/Transpose: it meets the layer it can join
    ("quantized-gemm-rows", 3, keep_gemm_rows),     # then Reshape(−1, K) → QuantizedMatMul → Reshape: on y's rows
    ("add-layernorm", 3, fuse_add_layernorm),
    ("producer-quantize", 1, fuse_producer_quantize),   # the next GEMM's Q written by the LayerNorm/Attention before it
    ("conv-bias-layernorm", 3, move_conv_bias_into_layernorm),
    ("conv-pool", 3, fuse_conv_pool),
    ("conv-quantize", 1, fuse_conv_quantize),   # the next quantized conv's Q in a float conv's epilogue / pooling
    ("se-gate", 3, fuse_se_gate),     # Mul(x, gate) → 1×1 conv: the gate scales the GEMM's A (after conv-quantize)
    ("two-layer-mlp", 3, fuse_two_layer_mlp),     # squeeze-excite's two small GEMMs: one layer, one launch
    ("pointwise-chains", 3, pointwise.group_pointwise_chains),
]


def optimize(net: Network, shape_points: list[dict], level: int = 3, stage: str = "graph", **options) -> dict[str, int]:
    log = get_logger()
    report: dict[str, int] = {}
    for name, min_level, fn in (PASSES if stage == "graph" else LATE_PASSES):
        if level < min_level:
            continue
        changes = fn(net, shape_points=shape_points, **options)
        report[name] = report.get(name, 0) + changes
        log.verbose(f"pass {name}: {changes} change(s), {len(net.layers)} layers")
    if stage == "graph" and level >= 1:      # the same passes inside If/Loop/Scan bodies (passes/subgraphs.py)
        body = optimize_bodies(net, shape_points, lambda b, pts: optimize(b, pts, level, stage, **options),
                               options.get("max_fold_elements", 1 << 24))
        if body["bodies"]:
            report.update(body)
            log.verbose(f"bodies: {body['bodies']}, layers {body['body-layers-before']} → {body['body-layers-after']}")
    return report
