"""Samples from a file or a pipe, in chunks of a fixed size, as they arrive (a live source works:
a chunk is sent as soon as it is complete, the last one may be shorter)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import BinaryIO

import numpy as np

_SEPARATORS = re.compile(rb"[\s,]+")


def read_chunks(source: BinaryIO, size: int, fmt: str = "text") -> Iterator[np.ndarray]:
    """Chunks of `size` float32 samples from text numbers or raw little-endian float32."""
    if size < 1:
        raise ValueError("the chunk size must be at least 1 sample")
    if fmt == "f32":
        yield from _float32_chunks(source, size)
        return
    pending: list[float] = []
    for line in source:
        for token in _SEPARATORS.split(line.strip()):
            if token:
                pending.append(_number(token))
        while len(pending) >= size:
            yield np.asarray(pending[:size], dtype=np.float32)
            del pending[:size]
    if pending:
        yield np.asarray(pending, dtype=np.float32)


def _number(token: bytes) -> float:
    try:
        return float(token)
    except ValueError:
        raise ValueError(f"not a number in the input: {token[:40]!r}") from None


def _float32_chunks(source: BinaryIO, size: int) -> Iterator[np.ndarray]:
    want = 4 * size
    buf = b""
    while True:
        data = source.read(want - len(buf))
        if not data:
            break
        buf += data
        if len(buf) == want:
            yield np.frombuffer(buf, dtype="<f4").copy()
            buf = b""
    if len(buf) % 4:
        raise ValueError(f"float32 input ends with {len(buf) % 4} stray bytes")
    if buf:
        yield np.frombuffer(buf, dtype="<f4").copy()
