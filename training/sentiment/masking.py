"""The encoder's padding mask, made from tensor arithmetic alone (imports only torch: the GPU check
on a bare CUDA machine builds its stand-in model with it).

transformers builds the mask for eager attention from index tensors it creates on the device it
runs on (`torch.arange(..., device=...)`); a trace records that device as a literal, so a
TorchScript traced on a CPU machine would carry `torch.device("cpu")` and fail on a GPU. Handing
the encoder a ready 4D mask skips that code (transformers returns a 4D mask as it is): the traced
graph then names no device, and the numbers are the same ones (0 where a token is kept, the dtype's
most negative value where it is padding), so the encoder's output is bitwise unchanged.
"""

from __future__ import annotations

import torch


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """(B, T) of 1 (token) / 0 (padding) → (B, 1, 1, T) added to the attention scores."""
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min
