"""The LSTM and the two graphs exported from it.

One set of weights serves both modes: `SequenceGraph` runs a window from a zero state,
`StepGraph` takes and returns (h, c) so a stream can be continued chunk by chunk (T may be 1).
Both return the deterministic output and the LSTM features that feed the dropout head.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from handlers.uncertainty import MLPHead


class FrequencyLSTM(nn.Module):
    def __init__(self, num_frequencies: int, hidden: int, layers: int, dropout: float):
        super().__init__()
        self.lstm = nn.LSTM(1 + num_frequencies, hidden, num_layers=layers, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor):
        features, (hn, cn) = self.lstm(x, (h0, c0))
        output = self.out(self.dropout(features)).squeeze(-1)
        return output, features, hn, cn

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
        lstm = self.model.lstm
        h0 = signal.new_zeros((lstm.num_layers, signal.shape[0], lstm.hidden_size))
        output, features, _, _ = self.model(signal, h0, h0)
        return output, features


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
