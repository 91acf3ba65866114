"""Does a signal change in time? Lock-in fits over whole windows, and how much they move.

The out-of-distribution residual (handlers/frequency/ood.py) asks which frequencies a signal
holds; a signal whose in-family components change in time (an amplitude that steps half-way, a
component that switches on, 3.2 Hz read against a 3 Hz reference, whose phase turns 72 degrees a
second) passes it, and the model answers it confidently and wrongly. This module fits the
served sines and cosines and a constant to every whole window of `window_samples` (one period of
the lowest served frequency: 1,000 samples at 1 Hz, aligned with the signal's or stream's first
sample, so every window sees the same reference phases) and keeps running sums of the fits:

* `nonstationarity`: for each served frequency (and the constant), the spread of its fitted
  (I, Q) across windows, less what the noise alone would spread them (estimated from the fits'
  own residual, with a 4-sigma allowance), over the component's energy plus 1 % of the
  signal's (so an absent or faint component's noise is not a change); the largest over the
  frequencies. About 0 for a served-
  family signal; 0.1-0.2 for an amplitude tripled or divided by 3 half-way, 0.25-0.5 for a
  component that switches on after 1 s or one at 3.2 Hz read against 3 Hz. Needs two windows.
* `offset`: the share of the signal's energy in a constant (less the noise's share of it): a
  DC offset, which the served family never has. Needs one window.

The sums are linear in the samples and carried by a stream's state (`Stats`), so a stream judged
after n samples gets the figures a one-shot request of the same n samples gets: each chunk's
answer judges everything the stream has seen, in whole windows (the samples of an unfinished
window wait for it). Thresholds: training sets them on held-out signals of the served family
(training/frequency/ood.py) at a few percent of false flags.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from handlers.frequency.lockin import reference

NOISE_SIGMAS = 4.0
"""The spread the noise alone gives a coefficient is allowed this many of its standard deviations
above its expectation before any of it counts as change."""
FAINT_SHARE = 0.01
"""A component's change is weighed against its own energy plus this share of the signal's: so
the noise of an absent or faint component is not read as a change."""


def window_samples(sample_rate: int, frequencies: tuple[float, ...]) -> int:
    """Samples per judged window: one period of the lowest served frequency."""
    return max(int(round(sample_rate / min(frequencies))), 1)


def num_coefficients(num_frequencies: int) -> int:
    """(I, Q) per served frequency and the constant."""
    return 2 * num_frequencies + 1


def stats_size(num_frequencies: int) -> int:
    """Float64 numbers a `Stats` carries (the stream state's share)."""
    return 3 * num_coefficients(num_frequencies) + 4


@dataclass(frozen=True)
class Stats:
    """Running sums over a signal's whole windows, and the window in progress."""

    windows: int
    """Whole windows fitted."""
    energy: float
    """Sum of the squares of their samples."""
    residual: float
    """Their samples' energy the fits left (noise and whatever is not in the basis)."""
    sums: np.ndarray
    """(C,) sums over windows of each fitted coefficient: I, Q per frequency, then the constant."""
    squares: np.ndarray
    """(C,) sums over windows of the squares of each coefficient."""
    partial: np.ndarray
    """(C,) the window in progress: its samples times each basis function, summed."""
    partial_energy: float
    """The window in progress: the sum of the squares of its samples."""

    @classmethod
    def zero(cls, num_frequencies: int) -> Stats:
        c = num_coefficients(num_frequencies)
        return cls(0, 0.0, 0.0, np.zeros(c), np.zeros(c), np.zeros(c), 0.0)

    def to_array(self) -> np.ndarray:
        """(stats_size,) float64: what a stream state carries."""
        head = [float(self.windows), self.energy, self.residual, self.partial_energy]
        return np.concatenate([head, self.sums, self.squares, self.partial]).astype(np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray, num_frequencies: int) -> Stats:
        c = num_coefficients(num_frequencies)
        v = np.asarray(values, dtype=np.float64)
        return cls(int(v[0]), float(v[1]), float(v[2]), v[4 : 4 + c].copy(),
                   v[4 + c : 4 + 2 * c].copy(), v[4 + 2 * c :].copy(), float(v[3]))  # fmt: skip

    def valid(self, num_frequencies: int) -> bool:
        """A carried state's sums could have come from samples (a forged one may not)."""
        a = self.to_array()
        return (
            a.shape == (stats_size(num_frequencies),)
            and bool(np.isfinite(a).all())
            and float(self.windows) == a[0]
            and self.windows >= 0
            and min(self.energy, self.residual, self.partial_energy) >= 0.0
            and bool((self.squares >= 0.0).all())
        )


@functools.lru_cache(maxsize=8)
def _basis(
    window: int, sample_rate: int, frequencies: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """(window, C) the basis over one window from index 0 (sin, cos per frequency, then 1) and
    the inverse of its Gram matrix. The reference phase repeats every window when each frequency
    makes whole cycles in it (1, 3, 5, 7 Hz in 1 s), so one basis serves every window."""
    sin, cos = reference(np.asarray(frequencies, np.float64), np.arange(window), sample_rate)
    cols = [v for f in range(len(frequencies)) for v in (sin[f], cos[f])] + [np.ones(window)]
    basis = np.stack(cols, axis=1)
    inverse = np.linalg.pinv(basis.T @ basis)
    basis.setflags(write=False)
    inverse.setflags(write=False)
    return basis, inverse


def update(
    stats: Stats, samples: np.ndarray, start: int, sample_rate: int, frequencies: tuple[float, ...]
) -> Stats:
    """`stats` continued by `samples`, whose first is the signal's sample `start`."""
    w = window_samples(sample_rate, frequencies)
    basis, inverse = _basis(w, sample_rate, tuple(frequencies))
    x = np.asarray(samples, dtype=np.float64)
    windows, energy, residual = stats.windows, stats.energy, stats.residual
    sums, squares = stats.sums.copy(), stats.squares.copy()
    partial, partial_energy = stats.partial.copy(), stats.partial_energy
    at, pos = 0, start % w
    while at < x.shape[0]:
        take = min(w - pos, x.shape[0] - at)
        part = x[at : at + take]
        partial += part @ basis[pos : pos + take]
        partial_energy += float(part @ part)
        at, pos = at + take, pos + take
        if pos == w:
            coef = inverse @ partial
            windows += 1
            energy += partial_energy
            residual += max(partial_energy - float(partial @ coef), 0.0)
            sums += coef
            squares += coef * coef
            partial, partial_energy, pos = np.zeros_like(partial), 0.0, 0
    return Stats(windows, energy, residual, sums, squares, partial, partial_energy)


def of_signal(signal: np.ndarray, sample_rate: int, frequencies: tuple[float, ...]) -> Stats:
    """The sums of a one-shot signal read from its first sample."""
    return update(Stats.zero(len(frequencies)), signal, 0, sample_rate, frequencies)


@dataclass(frozen=True)
class Measures:
    nonstationarity: float | None
    """None: fewer than two whole windows, or silence."""
    offset: float | None
    """None: no whole window, or silence."""
    residual: float | None
    """Share of the whole windows' energy the served sines leave (the constant counts as left):
    the stream's residual (handlers/frequency/ood.py's figure, over whole windows)."""


def measures(stats: Stats, sample_rate: int, frequencies: tuple[float, ...]) -> Measures:
    k = stats.windows
    if k < 1 or not stats.energy > 0.0:
        return Measures(None, None, None)
    w = window_samples(sample_rate, frequencies)
    num_f = len(frequencies)
    _, inverse = _basis(w, sample_rate, tuple(frequencies))
    fit_dof = max(w - num_coefficients(num_f), 1)
    noise = stats.residual / (k * fit_dof)  # the noise's variance per sample
    coef_var = noise * np.diag(inverse)  # each coefficient's variance from the noise
    mean = stats.sums / k
    total = k * w
    # The constant: its energy over the whole windows, less the noise's expected share.
    dc_energy = max(total * mean[-1] ** 2 - total * coef_var[-1], 0.0)
    offset = min(dc_energy / stats.energy, 1.0)
    explained = stats.energy - stats.residual - total * (stats.squares[-1] / k)
    residual = min(max(1.0 - explained / stats.energy, 0.0), 1.0)
    nonstat = None
    if k >= 2:
        # The spread of each coefficient across windows (the sum of its squared deviations),
        # per component (I and Q together; the constant alone), less what the noise alone
        # spreads it: its chi-square expectation plus NOISE_SIGMAS of its standard deviations.
        spread = np.maximum(stats.squares - k * mean * mean, 0.0)
        change = np.append(spread[:-1].reshape(num_f, 2).sum(axis=1), 2.0 * spread[-1])
        var = np.append(coef_var[:-1].reshape(num_f, 2).mean(axis=1), 2.0 * coef_var[-1])
        spread_dof = np.append(np.full(num_f, 2.0 * (k - 1)), float(k - 1))
        change = change - var * (spread_dof + NOISE_SIGMAS * np.sqrt(2.0 * spread_dof))
        # A sinusoid's I^2 + Q^2 is twice its mean square; the constant's is doubled to match.
        own = np.append(stats.squares[:-1].reshape(num_f, 2).sum(axis=1), 2.0 * stats.squares[-1])
        floor = FAINT_SHARE * k * 2.0 * stats.energy / total
        nonstat = float(np.clip(np.max(change / (own + floor)), 0.0, 1.0))
    return Measures(
        None if nonstat is None else round(nonstat, 6), round(offset, 6), round(residual, 6)
    )
