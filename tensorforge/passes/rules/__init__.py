"""Fusion rules, one family per module (gelu, softmax, layernorm, conv_bn, attention, epilogue, pointwise,
horizontal_gemm).

Each module exports `RULES` (Rule instances, see base.py) or, for pointwise and horizontal GEMM grouping, a
pass function;
`passes/pipeline.py` orders them by optimisation level.
"""
