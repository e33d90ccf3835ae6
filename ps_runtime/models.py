"""The models PS jobs train, written here in plain torch (torchvision is not installed).

``build_model(name, num_classes=1000)`` returns ResNet18, AlexNet, VGG16, GoogLeNet or a
small CNN. The paper models keep their real layer shapes, so with 1000 classes their
parameter counts are the ones the scheduler's model table uses (ResNet18 11.69M,
AlexNet 61.1M, VGG16 138.36M, GoogLeNet 6.6M) and the bytes pushed through the KVStore
per batch are realistic. Every model ends in an adaptive average pool, so it accepts any
input size; CPU runs use 64x64 images (``input_size``, default 64) to keep compute
affordable. 64 rather than 32: at 32x32 the last ResNet/GoogLeNet stages are 1x1, and
batch norm cannot train on a batch of one 1x1 map, which Cost_bat(1) needs.

``smallcnn`` is the exception: it is the scheduler's layer list (1x28x28 input, see
:class:`SmallCNN`). One deliberate change for small inputs: AlexNet's first convolution uses stride 1 (and
padding 5) when the input is smaller than 64 pixels, because the ImageNet stride of 4
shrinks a 32x32 image to nothing before the last pooling layer. Strides do not change
parameter counts.
"""

from __future__ import annotations

import torch
from torch import nn

MODEL_NAMES = ("smallcnn", "resnet18", "alexnet", "vgg16", "googlenet")


def _conv_bn(c_in: int, c_out: int, k: int, stride: int = 1, padding: int = 0) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, k, stride=stride, padding=padding, bias=False),
                         nn.BatchNorm2d(c_out, eps=0.001), nn.ReLU(inplace=True))


class SmallCNN(nn.Module):
    """The scheduler's ``smallcnn`` (sluice_common.models.SMALLCNN_LAYERS), built from that
    very layer list so that the parameter count the scheduler plans with is what goes on
    the wire: 3x3 convolutions (padding 1) each followed by ReLU and 2x2 max-pooling, then
    fully connected layers with ReLU between them. Input 1x28x28 (MNIST-sized), 10
    classes: ~0.42M parameters, 1.7 MB of gradients per batch."""

    def __init__(self, num_classes: int | None = None):
        super().__init__()
        from sluice_common.models import SMALLCNN_LAYERS

        convs = [l for l in SMALLCNN_LAYERS if l.kind == "conv"]
        fcs = [l for l in SMALLCNN_LAYERS if l.kind == "fc"]
        features: list[nn.Module] = []
        for layer in convs:
            features += [nn.Conv2d(layer.c_in, layer.c_out, layer.k, padding=layer.k // 2),
                         nn.ReLU(inplace=True), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*features)
        head: list[nn.Module] = []
        for i, layer in enumerate(fcs):
            last = i == len(fcs) - 1
            c_out = num_classes if (last and num_classes) else layer.c_out
            head.append(nn.Linear(layer.h * layer.w * layer.c_in, c_out))
            if not last:
                head.append(nn.ReLU(inplace=True))
        self.classifier = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


# ---- ResNet18 ------------------------------------------------------------------------

class _BasicBlock(nn.Module):
    def __init__(self, c_in: int, c_out: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.shortcut = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return torch.relu(out + self.shortcut(x))


class ResNet18(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False),
                                  nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                                  nn.MaxPool2d(3, stride=2, padding=1))
        stages, c_in = [], 64
        for c_out, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages += [_BasicBlock(c_in, c_out, stride), _BasicBlock(c_out, c_out, 1)]
            c_in = c_out
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.stages(self.stem(x))), 1))


# ---- AlexNet -------------------------------------------------------------------------

class AlexNet(nn.Module):
    def __init__(self, num_classes: int = 1000, input_size: int = 224):
        super().__init__()
        stride, pad = (4, 2) if input_size >= 64 else (1, 5)
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=stride, padding=pad), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2))
        self.pool = nn.AdaptiveAvgPool2d(6)
        self.classifier = nn.Sequential(
            nn.Dropout(), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            nn.Dropout(), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# ---- VGG16 ---------------------------------------------------------------------------

_VGG16_CFG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M",
              512, 512, 512, "M")


class VGG16(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 3
        for item in _VGG16_CFG:
            if item == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c_in, item, 3, padding=1), nn.ReLU(inplace=True)]
                c_in = item
        self.features = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(7)
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096), nn.ReLU(inplace=True), nn.Dropout(),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(),
            nn.Linear(4096, num_classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.pool(self.features(x)), 1))


# ---- GoogLeNet (Inception v1 with batch norm, no auxiliary heads) ----------------------

class _Inception(nn.Module):
    def __init__(self, c_in: int, c1: int, c3r: int, c3: int, c5r: int, c5: int, cp: int):
        super().__init__()
        self.b1 = _conv_bn(c_in, c1, 1)
        self.b2 = nn.Sequential(_conv_bn(c_in, c3r, 1), _conv_bn(c3r, c3, 3, padding=1))
        # The "5x5" branch uses a 3x3 kernel, as in the widely used reference weights
        # (the 6.6M parameter count of Table I depends on it).
        self.b3 = nn.Sequential(_conv_bn(c_in, c5r, 1), _conv_bn(c5r, c5, 3, padding=1))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True),
                                _conv_bn(c_in, cp, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], 1)


class GoogLeNet(nn.Module):
    def __init__(self, num_classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(
            _conv_bn(3, 64, 7, stride=2, padding=3), nn.MaxPool2d(3, stride=2, ceil_mode=True),
            _conv_bn(64, 64, 1), _conv_bn(64, 192, 3, padding=1),
            nn.MaxPool2d(3, stride=2, ceil_mode=True))
        self.blocks = nn.Sequential(
            _Inception(192, 64, 96, 128, 16, 32, 32),
            _Inception(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
            _Inception(480, 192, 96, 208, 16, 48, 64),
            _Inception(512, 160, 112, 224, 24, 64, 64),
            _Inception(512, 128, 128, 256, 24, 64, 64),
            _Inception(512, 112, 144, 288, 32, 64, 64),
            _Inception(528, 256, 160, 320, 32, 128, 128),
            nn.MaxPool2d(2, stride=2, ceil_mode=True),
            _Inception(832, 256, 160, 320, 32, 128, 128),
            _Inception(832, 384, 192, 384, 48, 128, 128))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.pool(self.blocks(self.stem(x))), 1)
        return self.fc(self.dropout(x))


def input_shape(name: str, input_size: int = 64) -> tuple[int, int, int]:
    """(channels, height, width) of one sample: smallcnn is fixed at 1x28x28 (its
    fully connected layer expects 7x7 after two poolings); the others take RGB images
    of ``input_size`` pixels."""
    return (1, 28, 28) if name.lower() == "smallcnn" else (3, input_size, input_size)


def build_model(name: str, num_classes: int | None = None, input_size: int = 64) -> nn.Module:
    """A fresh model. ``num_classes`` defaults to 10 for smallcnn, 1000 for the others."""
    name = name.lower()
    if name not in MODEL_NAMES:
        raise ValueError(f"unknown model '{name}' (known: {', '.join(MODEL_NAMES)})")
    if name == "smallcnn":
        return SmallCNN(num_classes)
    n = num_classes or 1000
    if name == "alexnet":
        return AlexNet(n, input_size)
    return {"resnet18": ResNet18, "vgg16": VGG16, "googlenet": GoogLeNet}[name](n)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
