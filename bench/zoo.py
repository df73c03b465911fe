"""The model zoo of BENCH.md with random weights (nothing downloaded), and its ONNX export.

Entry points: `ZOO` (name → Spec), `make(name)` → eval-mode nn.Module on CPU, fp32 (vision models `calibrate`d so
that outputs are not vanishingly small), `example(name, batch)` →
input tensor, `export(name, module, path)` → ONNX bytes with a dynamic batch axis (legacy exporter, opset 17;
the dynamo exporter is tried when the legacy one fails, and the result says which one produced the file).
torchvision and transformers are imported only here, only when a model is asked for.
"""

import io
from dataclasses import dataclass

import torch


@dataclass
class Spec:
    family: str          # "vision" (float image input) or "text" (int64 token ids)
    ctor: str            # torchvision model function name, or transformers model class
    seq: int = 128
    image: int = 224     # vision input height = width
    classifier: bool = True   # vision models end in class logits (top-1 agreement is meaningful)


ZOO = {
    "resnet50": Spec("vision", "resnet50"),
    "mobilenet_v3_large": Spec("vision", "mobilenet_v3_large"),
    "efficientnet_b0": Spec("vision", "efficientnet_b0"),
    "convnext_tiny": Spec("vision", "convnext_tiny"),
    "vit_b_16": Spec("vision", "vit_b_16"),
    "bert_base_seq128": Spec("text", "BertModel"),
    "gpt2_seq128": Spec("text", "GPT2Model"),
}
# tiny stand-ins for the CPU smoke test of the harness (plain torch / a 2-layer BERT: no torchvision, no downloads)
TINY = {
    "tiny_cnn": Spec("vision", "tiny_cnn", image=32),
    "tiny_bert": Spec("text", "TinyBert", seq=16),
}
ZOO.update(TINY)


class TinyCNN(torch.nn.Module):
    """conv-BN-ReLU ×2, global pool, linear: the shape of the CNN zoo in a few thousand weights."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU())
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.features(x).mean((2, 3)))


class LastHidden(torch.nn.Module):
    """transformers models return a ModelOutput; benchmark and export its last_hidden_state."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids).last_hidden_state


def make(name: str) -> torch.nn.Module:
    spec = ZOO[name]
    torch.manual_seed(0)
    if spec.ctor == "tiny_cnn":
        return calibrate(TinyCNN(), image=spec.image)
    if spec.family == "vision":
        import torchvision
        return calibrate(getattr(torchvision.models, spec.ctor)(weights=None))
    import transformers
    if spec.ctor == "BertModel":
        model = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False)
    elif spec.ctor == "TinyBert":
        cfg = transformers.BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                      vocab_size=VOCAB["TinyBert"], max_position_embeddings=64)
        model = transformers.BertModel(cfg, add_pooling_layer=False)
    else:
        model = transformers.GPT2Model(transformers.GPT2Config(use_cache=False))
    return LastHidden(model.eval()).eval()


@torch.no_grad()
def calibrate(model: torch.nn.Module, batches: int = 4, image: int = 224) -> torch.nn.Module:
    """Random weights, but outputs of a useful size: torchvision's init leaves BatchNorm running stats at (0, 1), so
    activations shrink layer after layer (mobilenet's logits come out near 1e-9, below fp16's range, and every
    precision comparison degenerates), and some heads start at zero (vit). BatchNorm statistics are re-estimated on
    random images (cumulative average), and an all-zero Linear gets N(0, 0.02) weights. Deterministic (seed 0)."""
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    for m in model.modules():
        if isinstance(m, torch.nn.Linear) and not m.weight.any():
            torch.nn.init.normal_(m.weight, std=0.02)
    if not norms:
        return model.eval()
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    g = torch.Generator().manual_seed(0)
    for _ in range(batches):
        model(torch.randn(8, 3, image, image, generator=g))
    return model.eval()


VOCAB = {"BertModel": 30522, "GPT2Model": 50257, "TinyBert": 512}


def example(name: str, batch: int, device="cpu", dtype=torch.float32, seed: int | None = None,
            seq: int | None = None) -> torch.Tensor:
    """The input of `batch` samples; `seed` defaults to the batch size (the timing inputs of every earlier run);
    calibration and test sets pass their own seeds so that the sets are distinct."""
    spec = ZOO[name]
    g = torch.Generator().manual_seed(batch if seed is None else seed)
    if spec.family == "vision":
        return torch.randn(batch, 3, spec.image, spec.image, generator=g).to(device=device, dtype=dtype)
    return torch.randint(0, VOCAB[spec.ctor], (batch, seq or spec.seq), generator=g).to(device)


def input_shape(name: str, batch: int, seq: int | None = None) -> tuple[int, ...]:
    spec = ZOO[name]
    return (batch, 3, spec.image, spec.image) if spec.family == "vision" else (batch, seq or spec.seq)


def export(name: str, module: torch.nn.Module, path=None, dynamic_seq: bool = False) -> tuple[bytes, str]:
    """(ONNX bytes, exporter used). Input 'input' with a dynamic batch axis (and, with `dynamic_seq`, a dynamic
    sequence axis for text models); output 'output'."""
    x = example(name, 2)
    axes = {0: "batch", 1: "seq"} if dynamic_seq else {0: "batch"}
    try:
        buf = io.BytesIO()
        torch.onnx.export(module, (x,), buf, dynamo=False, opset_version=17, input_names=["input"],
                          output_names=["output"], dynamic_axes={"input": axes, "output": dict(axes)})
        data, used = buf.getvalue(), "torchscript opset 17"
    except Exception as e:  # noqa: BLE001 - try the other exporter, and say so in the results
        legacy_error = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
        batch = torch.export.Dim("batch", min=1, max=1024)
        dims = {0: batch, 1: torch.export.Dim("seq", min=2, max=ZOO[name].seq)} if dynamic_seq else {0: batch}
        try:
            prog = torch.onnx.export(module, (x,), dynamo=True, opset_version=18, input_names=["input"],
                                     output_names=["output"], dynamic_shapes=(dims,))
        except Exception as e2:
            raise RuntimeError(f"both exporters failed: legacy: {legacy_error}; dynamo: {type(e2).__name__}: "
                               f"{(str(e2).splitlines() or [''])[0][:200]}") from e2
        data, used = prog.model_proto.SerializeToString(), f"dynamo opset 18 (legacy failed: {legacy_error})"
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data, used
