"""BERT and GPT-2 (transformers' own BertModel/GPT2Model, tiny random configs) end to end against onnxruntime.

Each model is exported by the test — legacy exporter at opsets 11 and 17, dynamo exporter at opset 18 —
with a dynamic (batch, sequence) axis pair, built once with a dynamic profile, run at two shapes with a
padded attention mask, compared with onnxruntime (rtol 1e-3, atol 1e-4), saved, loaded and compared again.
A static-shape build must fold every shape subgraph (Shape → Gather → Unsqueeze → Concat → Reshape,
Range, ConstantOfShape …) away; a dynamic build must keep that arithmetic on the host.
Needs `transformers` (no download: the weights are random).
"""

import functools

import numpy as np
import onnx
import pytest
import torch

from oracle import assert_close, export, ort_run

import tensorforge as tfg

transformers = pytest.importorskip("transformers")

NAMES = ["input_ids", "attention_mask"]
PROFILE = ((1, 2), (2, 5), (3, 8))                 # (batch, sequence): min, opt, max
RUN_SHAPES = ((2, 5), (3, 7))
SHAPE_OPS = {"Shape", "Size", "ConstantOfShape", "Range", "Unsqueeze", "Squeeze", "Concat", "Slice"}
EXPORTS = {"legacy-11": (False, 11), "legacy-17": (False, 17), "dynamo-18": (True, 18)}


class _Wrapped(torch.nn.Module):
    """Calls the Hugging Face model with keyword arguments and returns plain tensors."""

    def __init__(self, model, outputs: int):
        super().__init__()
        self.model, self.outputs = model, outputs

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False, return_dict=False)
        return out[0] if self.outputs == 1 else tuple(out[:self.outputs])


def _model(kind: str, attn: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if kind == "bert":
        cfg = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                      intermediate_size=64, max_position_embeddings=64, attn_implementation=attn)
        return _Wrapped(transformers.BertModel(cfg), outputs=2)           # last hidden state and pooler output
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                  attn_implementation=attn)
    return _Wrapped(transformers.GPT2Model(cfg), outputs=1)


@functools.lru_cache(maxsize=None)
def _onnx(kind: str, export_name: str) -> bytes:
    dynamo, opset = EXPORTS[export_name]
    attn = "eager" if opset < 14 else "sdpa"          # sdpa exports from opset 14; opset 11 users get eager
    model = _model(kind, attn)
    ids, mask = torch.randint(0, 100, (2, 5)), torch.ones(2, 5, dtype=torch.int64)
    axes = {n: {0: "batch", 1: "sequence"} for n in NAMES}
    data = export(model, (ids, mask), opset=opset, dynamo=dynamo, input_names=NAMES, dynamic_axes=axes)
    dims = [[d.dim_param for d in i.type.tensor_type.shape.dim] for i in onnx.load_from_string(data).graph.input]
    assert all(all(dims_i) for dims_i in dims), f"export lost the dynamic axes: {dims}"
    return data


def _feeds(shape, seed):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 100, shape).astype(np.int64)
    mask = np.ones(shape, np.int64)
    mask[-1, -2:] = 0                                  # the last sequence is padded
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("export_name", list(EXPORTS))
@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_dynamic_profile_matches_onnxruntime(kind, export_name, tmp_path):
    check_dynamic_profile(kind, export_name, tmp_path)


def check_dynamic_profile(kind, export_name, tmp_path):
    """The comparison of test_dynamic_profile_matches_onnxruntime (also called by test_mutation.py)."""
    data = _onnx(kind, export_name)
    engine = tfg.build(data, shapes={n: PROFILE for n in NAMES}, device="cpu")
    engine.save(tmp_path / "model.engine")
    reloaded = tfg.load(tmp_path / "model.engine", device="cpu")
    for i, shape in enumerate(RUN_SHAPES):
        feeds = _feeds(shape, i)
        want = ort_run(data, feeds)
        assert_close(engine.run(dict(feeds)), want, 1e-3, 1e-4, f"{kind} {export_name} {shape} built: ")
        assert_close(reloaded.run(dict(feeds)), want, 1e-3, 1e-4, f"{kind} {export_name} {shape} reloaded: ")
    layers = engine.data.layers
    shape_layers = [layer for layer in layers if layer.op == "Shape"]
    assert shape_layers and all(layer.placement == "host" for layer in shape_layers)
    assert all(layer.placement == "host" for layer in layers if layer.op in ("Range", "Concat", "Unsqueeze"))
    assert any(layer.placement == "device" for layer in layers if layer.op in ("MatMul", "Gemm", "Attention"))
    return engine


@pytest.mark.parametrize("export_name", list(EXPORTS))
@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_static_build_folds_shape_arithmetic(kind, export_name):
    data = _onnx(kind, export_name)
    graph_ops = [n.op_type for n in onnx.load_from_string(data).graph.node]
    assert sum(op in SHAPE_OPS for op in graph_ops) >= 8        # the export really builds shape subgraphs
    engine = tfg.build(data, shapes={n: RUN_SHAPES[0] for n in NAMES}, device="cpu")
    # a Gather of data at a constant position (the pooler's hidden[:, 0]) becomes a Slice/Squeeze view: not shape work
    left = [layer.op for layer in engine.data.layers if layer.op in SHAPE_OPS
            and not (layer.op in ("Slice", "Squeeze") and layer.name.split("/")[-1] in ("slice", "squeeze"))]
    assert left == [], f"shape arithmetic left after folding: {left}"
    assert all(layer.placement == "device" for layer in engine.data.layers)
    feeds = _feeds(RUN_SHAPES[0], 7)
    assert_close(engine.run(dict(feeds)), ort_run(data, feeds), 1e-3, 1e-4, f"{kind} {export_name} static: ")
