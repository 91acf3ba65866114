"""Texts → padded id/mask arrays with the artifact's own tokenizer.json, truncated the way the
model was trained (head+tail: the first `head_tokens` content tokens and the rest from the end).

Batches are padded to their longest text, not a fixed length: short requests stay cheap, and
attention masking makes the answer for a text independent of what it was batched with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from handlers.errors import ArchiveError


@dataclass(frozen=True)
class EncodedBatch:
    input_ids: np.ndarray
    """(B, T) int64, T = the longest text in the batch after truncation."""
    attention_mask: np.ndarray
    """(B, T) int64, 1 on real tokens."""
    truncated: tuple[bool, ...]
    """Per text: whether tokens were cut to fit max_length."""


def truncate_ids(ids: list[int], budget: int, head_tokens: int) -> list[int]:
    """Keep `head_tokens` from the start and fill the budget from the end (training does the same)."""
    if len(ids) <= budget:
        return ids
    head = min(head_tokens, budget)
    return ids[:head] + ids[len(ids) - (budget - head) :]


def pad_rows(rows: Sequence[list[int]], pad_token_id: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, attention mask), (B, T) int64, padded to the longest row of this batch (training pads
    the same way)."""
    longest = max((len(r) for r in rows), default=0)
    ids = np.full((len(rows), longest), pad_token_id, dtype=np.int64)
    mask = np.zeros((len(rows), longest), dtype=np.int64)
    for i, row in enumerate(rows):
        ids[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return ids, mask


def special_tokens(tokenizer: Tokenizer) -> tuple[list[int], list[int]]:
    """The ids the post-processor puts before and after a single text ([CLS] / [SEP] for BERT)."""
    plain = tokenizer.encode("hello", add_special_tokens=False).ids
    full = tokenizer.encode("hello", add_special_tokens=True).ids
    for start in range(len(full) - len(plain) + 1):
        if full[start : start + len(plain)] == plain:
            return full[:start], full[start + len(plain) :]
    raise ArchiveError("cannot tell the tokenizer's special tokens apart from the text")


class TextEncoder:
    def __init__(
        self, tokenizer_file: str | Path, max_length: int, pad_token_id: int, head_tokens: int
    ):
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # The file may carry fixed-length padding and plain truncation: both are done here instead.
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        self.prefix, self.suffix = special_tokens(self.tokenizer)
        self.budget = max_length - len(self.prefix) - len(self.suffix)
        if self.budget < 1:
            raise ArchiveError(f"max_length {max_length} leaves no room for text")
        self.head_tokens = head_tokens
        self.pad_token_id = pad_token_id

    def pieces(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, untruncated and without special tokens: computed once per text,
        then used both to count a request's cost and to build the runtime's batch."""
        return [e.ids for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def token_count(self, pieces: Sequence[list[int]]) -> int:
        """Tokens the runtime will see for these texts after truncation, special tokens included."""
        extra = len(self.prefix) + len(self.suffix)
        return sum(min(len(p), self.budget) + extra for p in pieces)

    def encode(
        self, texts: Sequence[str], pieces: Sequence[list[int]] | None = None
    ) -> EncodedBatch:
        """The runtime's padded batch; `pieces` (from `pieces(texts)`) skips tokenizing again."""
        if pieces is None:
            pieces = self.pieces(texts)
        rows = [
            [*self.prefix, *truncate_ids(p, self.budget, self.head_tokens), *self.suffix]
            for p in pieces
        ]
        ids, mask = pad_rows(rows, self.pad_token_id)
        return EncodedBatch(ids, mask, tuple(len(p) > self.budget for p in pieces))
