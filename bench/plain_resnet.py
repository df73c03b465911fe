"""ResNet-50 in plain torch (no torchvision): the zoo's resnet50 where torchvision cannot be installed (the CPU).

Entry points: `resnet50()` → the torchvision architecture (ResNet v1.5: stride on the 3×3 conv of each bottleneck,
blocks 3-4-6-3, widths 64-128-256-512 ×4, 1000 classes) with torchvision's initialisation (Kaiming-normal fan-out
convs, BatchNorm γ=1 β=0, Linear at torch's default), modules built in torchvision's order so the same seed draws
the same weights; `make(image)` → it after bench/zoo.calibrate (seed 0), eval mode; `export(model, image)` → ONNX
bytes as zoo.export writes them (input 'input', output 'output', dynamic batch, opset 17).
"""

import io

import torch
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1, downsample: nn.Module | None = None):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(planes * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet50(nn.Module):
    def __init__(self, layers=(3, 4, 6, 3), classes: int = 1000):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        self.layer1 = self._stage(64, layers[0], 1)
        self.layer2 = self._stage(128, layers[1], 2)
        self.layer3 = self._stage(256, layers[2], 2)
        self.layer4 = self._stage(512, layers[3], 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * 4, classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def _stage(self, planes: int, blocks: int, stride: int) -> nn.Sequential:
        down = None
        if stride != 1 or self.inplanes != planes * 4:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * 4, 1, stride=stride, bias=False),
                                 nn.BatchNorm2d(planes * 4))
        out = [Bottleneck(self.inplanes, planes, stride, down)]
        self.inplanes = planes * 4
        out += [Bottleneck(self.inplanes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*out)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet50() -> ResNet50:
    return ResNet50()


def make(image: int = 224) -> nn.Module:
    """zoo.make('resnet50') without torchvision: seed 0, then zoo.calibrate's BatchNorm re-estimation on random
    images of `image`×`image` (zoo.calibrate uses 224 for torchvision models)."""
    import zoo
    torch.manual_seed(0)
    return zoo.calibrate(resnet50(), image=image)


def export(model: nn.Module, image: int = 224) -> bytes:
    x = torch.randn(2, 3, image, image, generator=torch.Generator().manual_seed(2))
    buf = io.BytesIO()
    torch.onnx.export(model, (x,), buf, dynamo=False, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
    return buf.getvalue()
