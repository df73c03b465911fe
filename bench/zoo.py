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


ZOO = {
    "resnet50": Spec("vision", "resnet50"),
    "mobilenet_v3_large": Spec("vision", "mobilenet_v3_large"),
    "efficientnet_b0": Spec("vision", "efficientnet_b0"),
    "convnext_tiny": Spec("vision", "convnext_tiny"),
    "vit_b_16": Spec("vision", "vit_b_16"),
    "bert_base_seq128": Spec("text", "BertModel"),
    "gpt2_seq128": Spec("text", "GPT2Model"),
}


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
    if spec.family == "vision":
        import torchvision
        return calibrate(getattr(torchvision.models, spec.ctor)(weights=None))
    import transformers
    if spec.ctor == "BertModel":
        model = transformers.BertModel(transformers.BertConfig(), add_pooling_layer=False)
    else:
        model = transformers.GPT2Model(transformers.GPT2Config(use_cache=False))
    return LastHidden(model.eval()).eval()


@torch.no_grad()
def calibrate(model: torch.nn.Module, batches: int = 4) -> torch.nn.Module:
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
        model(torch.randn(8, 3, 224, 224, generator=g))
    return model.eval()


def example(name: str, batch: int, device="cpu", dtype=torch.float32) -> torch.Tensor:
    spec = ZOO[name]
    g = torch.Generator().manual_seed(batch)
    if spec.family == "vision":
        return torch.randn(batch, 3, 224, 224, generator=g).to(device=device, dtype=dtype)
    vocab = 30522 if spec.ctor == "BertModel" else 50257
    return torch.randint(0, vocab, (batch, spec.seq), generator=g).to(device)


def export(name: str, module: torch.nn.Module, path=None) -> tuple[bytes, str]:
    """(ONNX bytes, exporter used). Input 'input' with a dynamic batch axis; output 'output'."""
    x = example(name, 2)
    try:
        buf = io.BytesIO()
        torch.onnx.export(module, (x,), buf, dynamo=False, opset_version=17, input_names=["input"],
                          output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        data, used = buf.getvalue(), "torchscript opset 17"
    except Exception as e:  # noqa: BLE001 - try the other exporter, and say so in the results
        legacy_error = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0][:200]}"
        batch = torch.export.Dim("batch", min=1, max=1024)
        try:
            prog = torch.onnx.export(module, (x,), dynamo=True, opset_version=18, input_names=["input"],
                                     output_names=["output"], dynamic_shapes=({0: batch},))
        except Exception as e2:
            raise RuntimeError(f"both exporters failed: legacy: {legacy_error}; dynamo: {type(e2).__name__}: "
                               f"{(str(e2).splitlines() or [''])[0][:200]}") from e2
        data, used = prog.model_proto.SerializeToString(), f"dynamo opset 18 (legacy failed: {legacy_error})"
    if path is not None:
        with open(path, "wb") as f:
            f.write(data)
    return data, used
