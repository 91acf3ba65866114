"""The two architectures one training code exports: a small CNN and a tiny ResNet. Both take an
NCHW batch of any (channels, side) and return (logits (batch, classes), features (batch, D)): the
pooled features feed the dropout → linear head, which the handler samples for MC-dropout
uncertainty from head.npz (handlers/uncertainty.py). The handler is told the shapes and names by the
manifest, never by the code."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from handlers.uncertainty import MLPHead

ARCHS = ("cnn", "resnet")
INPUT_NAME = "image"
OUTPUT_NAME = "logits"
FEATURES_NAME = "features"


def conv_bn(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


class DigitsCNN(nn.Module):
    """conv-conv-pool-conv-conv, global average pooling, dropout, linear."""

    def __init__(self, channels: int, classes: int, width: int, dropout: float):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(channels, width),
            conv_bn(width, width),
            nn.MaxPool2d(2),
            conv_bn(width, 2 * width),
            conv_bn(2 * width, 2 * width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(2 * width, classes)

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(image)
        return self.out(self.dropout(features)), features


class BasicBlock(nn.Module):
    """ResNet's basic block: two 3x3 convolutions and the identity (or a 1x1 projection)."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.body = nn.Sequential(
            conv_bn(cin, cout, stride),
            nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            nn.BatchNorm2d(cout),
        )
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout)
            )
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.body(x) + self.skip(x))


class TinyResNet(nn.Module):
    """Stem, three residual blocks (one downsampling), global average pooling, dropout, linear."""

    def __init__(self, channels: int, classes: int, width: int, dropout: float):
        super().__init__()
        self.features = nn.Sequential(
            conv_bn(channels, width),
            BasicBlock(width, width),
            BasicBlock(width, 2 * width, stride=2),
            BasicBlock(2 * width, 2 * width),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
        )
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(2 * width, classes)

    def forward(self, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        features = self.features(image)
        return self.out(self.dropout(features)), features


def mlp_head(model: nn.Module) -> MLPHead:
    """The model's dropout → linear head as numpy arrays (head.npz) for handlers.uncertainty."""
    out, dropout = model.out, model.dropout
    assert isinstance(out, nn.Linear) and isinstance(dropout, nn.Dropout)
    return MLPHead(
        weights=(out.weight.detach().cpu().numpy().astype(np.float32),),
        biases=(out.bias.detach().cpu().numpy().astype(np.float32),),
        activations=("none",),
        dropout=float(dropout.p),
    )


def build_model(arch: str, channels: int, classes: int, width: int, dropout: float) -> nn.Module:
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, not {arch!r}")
    cls = DigitsCNN if arch == "cnn" else TinyResNet
    return cls(channels, classes, width, dropout)
