"""Texts → padded id/mask arrays with the artifact's own tokenizer.json.

Batches are padded to their longest text, not a fixed length: short requests stay cheap, and
attention masking makes the answer for a text independent of what it was batched with.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer


@dataclass(frozen=True)
class EncodedBatch:
    input_ids: np.ndarray
    """(B, T) int64, T = the longest text in the batch after truncation."""
    attention_mask: np.ndarray
    """(B, T) int64, 1 on real tokens."""
    truncated: tuple[bool, ...]
    """Per text: whether tokens were cut to fit max_length."""


class TextEncoder:
    def __init__(
        self, tokenizer_file: str | Path, max_length: int, pad_token_id: int, side: str = "right"
    ):
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # The file may carry fixed-length padding from training; padding is done per batch here.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length, stride=0, direction=side)
        self.pad_token_id = pad_token_id

    def encode(self, texts: list[str]) -> EncodedBatch:
        encodings = self.tokenizer.encode_batch(texts)
        longest = max((len(e.ids) for e in encodings), default=0)
        ids = np.full((len(texts), longest), self.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(texts), longest), dtype=np.int64)
        for row, enc in enumerate(encodings):
            ids[row, : len(enc.ids)] = enc.ids
            mask[row, : len(enc.ids)] = 1
        return EncodedBatch(ids, mask, tuple(bool(e.overflowing) for e in encodings))
