"""Elementwise configs pruned before compiling (kernels/compile_cache.prune_block_configs, used by the builder's
_prune for PointwiseChain layers), against hand-computed cases: elements per thread = BLOCK / (32·warps), and a
config is dropped only when another with the same variant switches also covers the tensor in one program with
fewer elements per thread (or as many, and a smaller BLOCK)."""

import torch

from tensorforge.builder.tactics import _prune
from tensorforge.codegen import generate_pointwise
from tensorforge.ir import Layer
from tensorforge.kernels import generated
from tensorforge.kernels.compile_cache import prune_block_configs
from tensorforge.kernels.triton_pointwise import CONFIGS, TritonPointwise

A, B, C, D = ({"BLOCK": 512, "warps": 4}, {"BLOCK": 1024, "warps": 4}, {"BLOCK": 2048, "warps": 8},
              {"BLOCK": 256, "warps": 1})
LEAN = {"BLOCK": 4096, "warps": 4, "lean": 1}


def test_one_program_configs_keep_the_most_threads_working():
    # n = 200: all four cover it in one program; elements per thread 4, 8, 8, 8 → only A is kept
    kept, dropped = prune_block_configs([A, B, C, D, LEAN], 200)
    assert kept == [A, LEAN]                       # LEAN has no peer with its switches: kept
    assert set(dropped) == {"BLOCK=1024,warps=4", "BLOCK=2048,warps=8", "BLOCK=256,warps=1"}
    assert "4 elements per thread instead of 8" in dropped["BLOCK=1024,warps=4"]


def test_configs_that_need_several_programs_are_kept():
    # n = 600: A (512) and D (256) need two or more programs: kept; B and C cover it, 8 elements per thread
    # each, so the larger BLOCK (C) goes
    kept, dropped = prune_block_configs([A, B, C, D], 600)
    assert kept == [A, B, D] and list(dropped) == ["BLOCK=2048,warps=8"]
    assert prune_block_configs([A, B, C, D], 1 << 20) == ([A, B, C, D], {})
    assert prune_block_configs([A, B], 0) == ([A, B], {})


def test_the_builder_prunes_a_small_chain_before_compiling():
    layer = Layer("se_gate", "PointwiseChain", ["x"], ["y"],
                  {"steps": [{"op": "Sigmoid", "args": ["in0"], "attrs": {}}], "outputs": ["s0"],
                   "out_dtypes": ["float16"]})
    layer.attrs["kernel"] = generated.register_source(generate_pointwise(layer, [torch.float16], 1))

    class T:                                       # the registered tactic's id scheme, without a CUDA device
        name = "triton_generated"
        id = staticmethod(lambda cfg: "pointwisechain.triton_generated[" +
                          ",".join(f"{k}={v}" for k, v in sorted(cfg.items())) + "]")
    found = [(T, c) for c in CONFIGS]
    pruned = _prune(layer, found, [torch.zeros(1, 960, 1, 1, dtype=torch.float16)], torch.device("cpu"))
    # 960 elements: 1024/4 warps covers it at 8 per thread; 2048/8, 4096/8, 8192/16 cover it at 8, 16, 16
    assert set(pruned) == {T.id(C), T.id({"BLOCK": 4096, "warps": 8}), T.id({"BLOCK": 8192, "warps": 16}),
                           T.id(LEAN)}
    assert all(r.startswith("pruned before compiling") for r in pruned.values())
    assert TritonPointwise.fits is not None        # the variants are judged by fits() after pruning, as before
