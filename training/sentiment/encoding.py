"""Text → padded token arrays with head+tail truncation, and length-sorted batches.

Head+tail: a review longer than the budget keeps its first `head_tokens` tokens and its last
ones; the verdict of a long review is often in its closing sentences.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from transformers import PreTrainedTokenizerFast

# The serving tokenizer's truncation and padding: training feeds the model what serving will.
from handlers.kits.text.tokenize import pad_rows as serving_pad_rows
from handlers.kits.text.tokenize import truncate_ids

__all__ = ["Encoded", "encode", "length_batches", "pad_rows", "token_rows", "truncate_ids"]


@dataclass(frozen=True)
class Encoded:
    input_ids: np.ndarray
    """(B, T) int64, padded with the tokenizer's pad id."""
    attention_mask: np.ndarray
    """(B, T) int64, 1 for real tokens."""


def token_rows(
    tokenizer: PreTrainedTokenizerFast, texts: Sequence[str], max_length: int, head_tokens: int
) -> list[list[int]]:
    """[CLS] + head+tail-truncated tokens + [SEP], at most max_length ids per text, unpadded."""
    pieces = tokenizer(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    budget = max_length - 2
    return [
        [tokenizer.cls_token_id, *truncate_ids(ids, budget, head_tokens), tokenizer.sep_token_id]
        for ids in pieces
    ]


def pad_rows(rows: Sequence[list[int]], pad_token_id: int) -> Encoded:
    """Pad to the longest row of this batch (not to max_length: padding costs compute)."""
    return Encoded(*serving_pad_rows(rows, pad_token_id))


def encode(
    tokenizer: PreTrainedTokenizerFast, texts: Sequence[str], max_length: int, head_tokens: int
) -> Encoded:
    return pad_rows(token_rows(tokenizer, texts, max_length, head_tokens), tokenizer.pad_token_id)


def length_batches(
    lengths: np.ndarray, batch_size: int, rng: np.random.Generator | None = None
) -> Iterator[np.ndarray]:
    """Index batches of similar length, so little compute is spent on padding.

    With rng, reviews are shuffled first and sorted only within chunks of 50 batches, and the
    batch order is shuffled: training still sees a random mix of sources and labels.
    """
    n = len(lengths)
    if rng is None:
        order = np.argsort(lengths, kind="stable")
        yield from (order[i : i + batch_size] for i in range(0, n, batch_size))
        return
    perm = rng.permutation(n)
    chunk = batch_size * 50
    batches = []
    for start in range(0, n, chunk):
        part = perm[start : start + chunk]
        part = part[np.argsort(lengths[part], kind="stable")]
        batches += [part[i : i + batch_size] for i in range(0, len(part), batch_size)]
    for j in rng.permutation(len(batches)):
        yield batches[j]
