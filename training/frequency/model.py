"""The LSTM and the two graphs exported from it.

One set of weights serves both modes: `SequenceGraph` runs a window from a zero state,
`StepGraph` takes and returns (h, c) so a stream can be continued chunk by chunk (T may be 1).
Both return the deterministic output and the features that feed the dropout head.

Architectures (`arch`): `lstm`, and `lstm-attention`, where the sequence mode adds self-attention
over the window's LSTM outputs, a residual connection and LayerNorm before the shared head. The
stateful mode stays the plain LSTM in both (docs/architecture.md says why).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from handlers.uncertainty import MLPHead

ARCHS = ("lstm", "lstm-attention")


class WindowAttention(nn.Module):
    """(B, L, H) → (B, L, H): multi-head self-attention over a window, residual, LayerNorm.

    Written out (not nn.MultiheadAttention) so eager, TorchScript and the TorchScript-based ONNX
    exporter all run the same ops: no fused fast path in eager that the exports lack.
    """

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        if hidden % heads:
            raise ValueError(f"hidden {hidden} is not divisible by {heads} heads")
        self.heads = heads
        self.head_dim = hidden // heads
        self.scale = float(self.head_dim) ** -0.5
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape[0], x.shape[1], x.shape[2]
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        weights = torch.softmax(torch.matmul(q, k.transpose(-2, -1)) * self.scale, dim=-1)
        mixed = torch.matmul(weights, v).transpose(1, 2).reshape(b, t, h)
        return self.norm(x + self.proj(mixed))


class FrequencyLSTM(nn.Module):
    def __init__(
        self,
        num_frequencies: int,
        hidden: int,
        layers: int,
        dropout: float,
        arch: str = "lstm",
        heads: int = 4,
    ):
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"arch must be one of {ARCHS}, not {arch!r}")
        self.arch = arch
        self.lstm = nn.LSTM(1 + num_frequencies, hidden, num_layers=layers, batch_first=True)
        # Identity for the plain LSTM keeps one scriptable code path for both architectures.
        self.mixer = WindowAttention(hidden, heads) if arch == "lstm-attention" else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor):
        """The stateful (step) path: the plain LSTM with its state carried in and out."""
        features, (hn, cn) = self.lstm(x, (h0, c0))
        output = self.out(self.dropout(features)).squeeze(-1)
        return output, features, hn, cn

    def sequence(self, x: torch.Tensor):
        """The windowed path: a window from a zero state, through the mixer (attention or not)."""
        h0 = x.new_zeros((self.lstm.num_layers, x.shape[0], self.lstm.hidden_size))
        features, _ = self.lstm(x, (h0, h0))
        features = self.mixer(features)
        return self.out(self.dropout(features)).squeeze(-1), features

    def zero_state(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (self.lstm.num_layers, batch, self.lstm.hidden_size)
        return torch.zeros(shape), torch.zeros(shape)

    def head(self) -> MLPHead:
        return MLPHead(
            weights=(self.out.weight.detach().numpy().astype(np.float32),),
            biases=(self.out.bias.detach().numpy().astype(np.float32),),
            activations=("none",),
            dropout=float(self.dropout.p),
        )


class SequenceGraph(nn.Module):
    """signal (B, L, 1+F) → output (B, L), features (B, L, H), from a zero state."""

    def __init__(self, model: FrequencyLSTM):
        super().__init__()
        self.model = model

    def forward(self, signal: torch.Tensor):
        return self.model.sequence(signal)


class StepGraph(nn.Module):
    """signal (B, T, 1+F), h0, c0 (layers, B, H) → output, features, hn, cn."""

    def __init__(self, model: FrequencyLSTM):
        super().__init__()
        self.model = model

    def forward(self, signal: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor):
        return self.model(signal, h0, c0)


SEQUENCE_INPUTS = ("signal",)
SEQUENCE_OUTPUTS = ("output", "features")
STEP_INPUTS = ("signal", "h0", "c0")
STEP_OUTPUTS = ("output", "features", "hn", "cn")
