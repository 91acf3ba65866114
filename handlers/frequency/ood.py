"""Is a signal one the model knows? The share of its energy the served frequencies cannot explain.

`residual` fits sines and cosines of the served frequencies to the signal by least squares (in
blocks of `BLOCK_PERIODS` periods of the lowest frequency, so a slowly drifting phase is still
fitted; no DC term: a constant offset is not in the family and counts as unexplained) and returns
the energy left over relative to the signal's: near 0 for a clean in-family mix, the noise's
share for a noisy one, near 1 for white noise or tones at other frequencies (2 Hz, 11 Hz). Past
the threshold training set on held-out in-family signals (the manifest's `ood_threshold`), the
answer says `out_of_distribution: true`. It does not depend on which frequencies were requested,
nor on the model: it judges the input, not the answer.

A signal shorter than one period of the lowest frequency (1,000 samples at 1 Hz) is not judged
(`residual` returns None): over less than a period the served sines fit almost anything (1 and
3 Hz over 0.1 s are nearly the same curve), so a small residual would mean nothing. A stream is
judged on everything it has seen, in whole windows (handlers/frequency/stationarity.py, which
also gives the figures that say whether a signal changes in time).
"""

from __future__ import annotations

import functools

import numpy as np

from handlers.frequency.stationarity import window_samples

BLOCK_PERIODS = 2
"""Block length in periods of the lowest served frequency (2 s at 1 Hz)."""


def residual(signal: np.ndarray, sample_rate: int, frequencies: tuple[float, ...]) -> float | None:
    """Share of `signal`'s energy outside the served frequencies, in [0, 1]; None when the signal
    is too short to tell (under one period of the lowest frequency: `window_samples`) or all
    zeros."""
    x = np.asarray(signal, dtype=np.float64)
    n = x.shape[0]
    if n < window_samples(sample_rate, frequencies):
        return None
    energy = float(x @ x)
    if not energy > 0.0 or not np.isfinite(energy):
        return None
    block = max(int(round(BLOCK_PERIODS * sample_rate / min(frequencies))), 1)
    bounds = list(range(0, n, block))
    if len(bounds) > 1 and n - bounds[-1] < block // 2:
        bounds.pop()  # a short tail joins the block before it
    explained = 0.0
    for lo, hi in zip(bounds, bounds[1:] + [n], strict=True):
        # The fitted span does not depend on where the block starts (a shifted sine is a sine):
        # one orthonormal basis per block length, and the explained energy is |Q^T y|^2.
        q = _basis(hi - lo, sample_rate, tuple(frequencies))
        explained += float(np.square(q.T @ x[lo:hi]).sum())
    return min(max(1.0 - explained / energy, 0.0), 1.0)


@functools.lru_cache(maxsize=32)
def _basis(n: int, sample_rate: int, frequencies: tuple[float, ...]) -> np.ndarray:
    """(n, 2F) orthonormal basis of the sines and cosines of `frequencies` over n samples."""
    t = np.arange(n, dtype=np.float64) / sample_rate
    w = 2 * np.pi * np.asarray(frequencies, dtype=np.float64)[None, :] * t[:, None]
    q, r = np.linalg.qr(np.concatenate([np.sin(w), np.cos(w)], axis=1))
    keep = np.abs(np.diag(r)) > 1e-9 * max(float(np.abs(np.diag(r)).max()), 1e-300)
    q = q[:, keep]  # a block too short to tell two frequencies apart fits fewer functions
    q.setflags(write=False)
    return q
