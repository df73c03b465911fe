"""A MobileNetV3 / EfficientNet inverted-residual block with squeeze-excite, for the rules that fuse its parts
(se_gate.py, two_layer_mlp.py)."""

import torch


class InvertedResidualSE(torch.nn.Module):
    """depthwise 3×3 + act → squeeze-excite gate → 1×1 projection [+ x]."""

    def __init__(self, c=8, hidden=24, hard=False, residual=True, project_kernel=1, gate_readers=1, squeeze=6):
        super().__init__()
        self.expand = torch.nn.Conv2d(c, hidden, 1)
        self.dw = torch.nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden)
        self.fc1, self.fc2 = torch.nn.Conv2d(hidden, squeeze, 1), torch.nn.Conv2d(squeeze, hidden, 1)
        self.project = torch.nn.Conv2d(hidden, c, project_kernel, padding=project_kernel // 2)
        self.hard, self.residual, self.gate_readers = hard, residual, gate_readers

    def forward(self, x):
        y = torch.nn.functional.silu(self.dw(torch.nn.functional.silu(self.expand(x))))
        s = self.fc2(torch.relu(self.fc1(torch.nn.functional.adaptive_avg_pool2d(y, 1))))
        s = torch.nn.functional.hardsigmoid(s) if self.hard else torch.sigmoid(s)
        gated = y * s
        out = self.project(gated)
        if self.residual:
            out = out + x
        if self.gate_readers > 1:       # x ⊙ gate also read by something else
            out = out + gated.mean(dim=1, keepdim=True)
        return out
