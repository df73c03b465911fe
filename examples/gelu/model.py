"""The seed model: GELU applied twice, in the two forms users export.

- `MyNet`: `nn.GELU` twice. The legacy exporter at opset 11 writes Div, Erf, Add, Mul, Mul for each GELU;
  the dynamo exporter at opset 20 writes one `Gelu` node each.
- `MyNetPlugin`: the same math through a custom autograd Function whose `symbolic` emits
  `custom::MyGelu`, the pattern users follow when the converter does not know an op.
"""

import torch
import torch.nn as nn


class MyNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gelu = nn.GELU()

    def forward(self, x):
        return self.gelu(self.gelu(x))


class MyGelu(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.nn.functional.gelu(x)

    @staticmethod
    def symbolic(g, x):
        return g.op("custom::MyGelu", x)


class MyNetPlugin(nn.Module):
    def forward(self, x):
        return MyGelu.apply(MyGelu.apply(x))
