"""Split a signal into overlapping windows and stitch per-window outputs back with a taper
(`windowed`: every window of a batch's signals read in one call, then stitched per signal).

The LSTM starts every window from a zero state, so a window's first samples are its worst: it
has not yet seen enough of the signal to know where in the period it is. The taper is a Hann
window with its time axis bent (sin^2(pi * u^SKEW)), so its peak sits late in the window: where
two windows overlap, the one that has read more of the signal keeps most of the weight until
close to its own end. It still falls to ~0 at both ends, so the blend changes smoothly: no seam
where one window takes over from the next. Dividing by the summed weights (not assuming they add
up to 1) keeps the signal's own ends and any hop exact.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np

_FLOOR = 1e-3  # where only one window covers a sample (the signal's first samples) keep its output
SKEW = 3.0
"""Peak at u = 0.5 ** (1 / SKEW) of the window (0.79); 1.0 is the plain, symmetric Hann taper.
Chosen on the component error it gives; the price: where neighbours disagree the crossfade is
shorter (the seam test bounds it at the served window); metrics.json reports both tapers."""


def num_windows(length: int, window: int, hop: int) -> int:
    return 1 if length <= window else 1 + math.ceil((length - window) / hop)


def split(signal: np.ndarray, window: int, hop: int) -> np.ndarray:
    """(N,) → (W, window); the tail (or a signal shorter than one window) is zero-padded."""
    n = num_windows(signal.shape[0], window, hop)
    padded = np.zeros((n - 1) * hop + window, dtype=signal.dtype)
    padded[: signal.shape[0]] = signal
    idx = np.arange(n)[:, None] * hop + np.arange(window)[None, :]
    return padded[idx]


@functools.lru_cache(maxsize=16)
def taper(window: int, skew: float = SKEW) -> np.ndarray:
    """The (window,) weights, read-only (shared by every call)."""
    u = (np.arange(window) + 0.5) / window
    w = (np.sin(np.pi * u**skew) ** 2 + _FLOOR).astype(np.float64)
    w.setflags(write=False)
    return w


def stitch(pieces: np.ndarray, length: int, hop: int, skew: float = SKEW) -> np.ndarray:
    """(W, window, ...) per-window outputs → (length, ...) weighted overlap-add. Trailing axes are
    independent series stitched in one pass (every element's sums in the same order as alone)."""
    n, window = pieces.shape[:2]
    w = taper(window, skew).reshape(window, *([1] * (pieces.ndim - 2)))
    total = np.zeros(((n - 1) * hop + window, *pieces.shape[2:]), dtype=np.float64)
    weight = np.zeros((total.shape[0],) + (1,) * (pieces.ndim - 2), dtype=np.float64)
    for k in range(n):
        total[k * hop : k * hop + window] += pieces[k] * w
        weight[k * hop : k * hop + window] += w
    return (total / weight)[:length].astype(np.float32)


Reader = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(windows (U, window) float64, valid samples of each (U,), the window each row reads (R,),
selector of each row (R,)) → the model's (output, std), each (R, window): a model's reading of
windows, one runtime call for all; a signal's windows are passed once, however many selectors
read them."""


def windowed(
    signals: list[tuple[np.ndarray, tuple[int, ...]]],
    window: int,
    hop: int,
    read: Reader,
    skew: float = SKEW,
) -> list[tuple[np.ndarray, np.ndarray]]:
    """Every window of every (signal, selectors) read in one call of `read`, then stitched back
    per signal: [(output (F, N), std (F, N)) float32], F the signal's selectors."""
    wins: list[np.ndarray] = []
    lengths: list[np.ndarray] = []
    sources: list[np.ndarray] = []
    selectors: list[int] = []
    spans: list[tuple[int, int]] = []
    first, start = 0, 0  # the signal's first window, its first row
    for signal, chosen in signals:
        n = signal.shape[0]
        win = split(signal.astype(np.float64), window, hop)
        wins.append(win)
        lengths.append(np.minimum(window, n - np.arange(win.shape[0]) * hop))
        for sel in chosen:
            sources.append(first + np.arange(win.shape[0]))
            selectors.extend([sel] * win.shape[0])
        spans.append((start, win.shape[0]))
        first += win.shape[0]
        start += win.shape[0] * len(chosen)
    if not selectors:
        return []
    output, std = read(np.concatenate(wins), np.concatenate(lengths), np.concatenate(sources),
                       np.asarray(selectors))  # fmt: skip
    results = []
    for (signal, chosen), (start, n) in zip(signals, spans, strict=True):
        # One overlap-add for the signal's components and their bands: (n windows, window,
        # frequencies, output|std), the same sums per sample as stitching each series alone.
        f = len(chosen)
        rows_of = slice(start, start + f * n)
        if n == 1:  # `stitch` of one window: (0 + x * w) / (0 + w), without the copies
            w = taper(window, skew)
            length = signal.shape[0]
            one = [((0.0 + part[rows_of] * w) / w)[:, :length].astype(np.float32)
                   for part in (output, std)]  # fmt: skip
            results.append((one[0], one[1]))
            continue
        pieces = np.stack([output[rows_of], std[rows_of]], axis=-1)
        pieces = pieces.reshape(f, n, window, 2).transpose(1, 2, 0, 3)
        both = stitch(pieces, signal.shape[0], hop, skew)  # (samples, f, 2)
        results.append((np.ascontiguousarray(both[..., 0].T), np.ascontiguousarray(both[..., 1].T)))
    return results
