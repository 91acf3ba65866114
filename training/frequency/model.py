"""The LSTM and the two graphs exported from it.

A lock-in amplifier with an LSTM for its filter (handlers/frequency/lockin.py): the LSTM reads,
per block of samples, the block means of the sample times the selected frequency's reference sin
and cos, and the one-hot selector; its head answers the component's in-phase and quadrature
amplitudes (I, Q) against that reference, with no bias: an absent component is I = Q = 0. The
handler turns them into I*sin + Q*cos at each sample's own phase.

One set of weights serves both modes: `SequenceGraph` runs a window's blocks from a zero state,
`StepGraph` takes and returns (h, c) so a stream continues block by block (T may be 1).
Both return (I, Q) per block and the hidden states the dropout band is computed from.

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
INPUTS = 2
"""Leading input features of a block: twice the block means of the scaled sample times the
reference's sin and cos (handlers/frequency/lockin.block_features); the one-hot selector follows."""


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
        self.lstm = nn.LSTM(INPUTS + num_frequencies, hidden, num_layers=layers, batch_first=True)
        # Identity for the plain LSTM keeps one scriptable code path for both architectures.
        self.mixer = WindowAttention(hidden, heads) if arch == "lstm-attention" else nn.Identity()
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, 2, bias=False)
        """(I, Q) per block; no bias: an absent component answers exactly zero."""

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor):
        """The stateful (step) path: the plain LSTM with its state carried in and out."""
        features, (hn, cn) = self.lstm(x, (h0, c0))
        output = self.out(self.dropout(features))
        return output, features, hn, cn

    def sequence(self, x: torch.Tensor):
        """The windowed path: a window from a zero state, through the mixer (attention or not)."""
        h0 = x.new_zeros((self.lstm.num_layers, x.shape[0], self.lstm.hidden_size))
        features, _ = self.lstm(x, (h0, h0))
        features = self.mixer(features)
        return self.out(self.dropout(features)), features

    def zero_state(self, batch: int) -> tuple[torch.Tensor, torch.Tensor]:
        shape = (self.lstm.num_layers, batch, self.lstm.hidden_size)
        return torch.zeros(shape), torch.zeros(shape)

    def head(self) -> MLPHead:
        """The (I, Q) head: weight (2, H), zero bias, the dropout before it."""
        return MLPHead(
            weights=(self.out.weight.detach().numpy().astype(np.float32),),
            biases=(np.zeros(2, dtype=np.float32),),
            activations=("none",),
            dropout=float(self.dropout.p),
        )


class SequenceGraph(nn.Module):
    """blocks (B, T, 2+F) → (I, Q) (B, T, 2), hidden states (B, T, H), from a zero state."""

    def __init__(self, model: FrequencyLSTM):
        super().__init__()
        self.model = model

    def forward(self, signal: torch.Tensor):
        return self.model.sequence(signal)


class StepGraph(nn.Module):
    """blocks (B, T, 2+F), h0, c0 (layers, B, H) → (I, Q), hidden states, hn, cn."""

    def __init__(self, model: FrequencyLSTM):
        super().__init__()
        self.model = model

    def forward(self, signal: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor):
        return self.model(signal, h0, c0)


SEQUENCE_INPUTS = ("signal",)
SEQUENCE_OUTPUTS = ("output", "features")
STEP_INPUTS = ("signal", "h0", "c0")
STEP_OUTPUTS = ("output", "features", "hn", "cn")
