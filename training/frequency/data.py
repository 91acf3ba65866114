"""Training signals and the LSTM's inputs and targets.

Training draws from handlers/frequency/family.TRAINING (the served family, plus noise from 0, a
slowly drifting phase and mean mixing). The LSTM reads per-block lock-in features
(handlers/frequency/lockin.py) and is trained to answer each block's (I, Q) of the selected
component, in the units it reads (divided by the running RMS of the signal so far).

`make_signal` is the first recipe's generator (the mean of all four components, amplitude and
phase redrawn at every sample), kept for the explanation faithfulness and comparison tools:
mixed(t) = mean_i A_i(t) * sin(2*pi*f_i*t + phi_i(t)), with A_i(t) ~ U[0.8, 1.2] and
phi_i(t) ~ U[0, 2*pi*phase_noise); target_i(t) = sin(2*pi*f_i*t).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from handlers.frequency.family import Family, draw_parts
from handlers.frequency.lockin import window_inputs
from training.frequency.config import SignalSpec

__all__ = ["Drawn", "Signal", "draw_many", "make_signal", "rows", "stream_tables"]


@dataclass(frozen=True)
class Signal:
    t: np.ndarray
    """(N,) seconds."""
    mixed: np.ndarray
    """(N,) float32 noisy mix."""
    targets: np.ndarray
    """(F, N) float32 clean sinusoid per frequency."""


def make_signal(spec: SignalSpec, seed: int) -> Signal:
    rng = np.random.default_rng(seed)
    n = int(round(spec.duration_s * spec.sample_rate))
    t = np.arange(n, dtype=np.float64) / spec.sample_rate
    f = np.asarray(spec.frequencies, dtype=np.float64)[:, None]
    lo, hi = spec.amplitude_range
    amplitude = rng.uniform(lo, hi, size=(len(spec.frequencies), n))
    phase = rng.uniform(0.0, 2 * np.pi * spec.phase_noise, size=(len(spec.frequencies), n))
    mixed = (amplitude * np.sin(2 * np.pi * f * t + phase)).mean(axis=0)
    targets = np.sin(2 * np.pi * f * t)
    return Signal(t=t, mixed=mixed.astype(np.float32), targets=targets.astype(np.float32))


@dataclass(frozen=True)
class Drawn:
    """Signals of a family, all of one length."""

    mixed: np.ndarray
    """(S, N) float32."""
    components: np.ndarray
    """(S, F, N) float32: the truth of each frequency (zero when absent)."""
    iq: np.ndarray
    """(S, F, 2, N) float64: each component's (I, Q) against its reference oscillator."""


def draw_many(family: Family, rng: np.random.Generator, count: int, n: int) -> Drawn:
    parts = [draw_parts(rng, n, family) for _ in range(count)]
    return Drawn(
        np.stack([p[0] for p in parts]), np.stack([p[1] for p in parts]),
        np.stack([p[2] for p in parts]),
    )  # fmt: skip


def rows(
    drawn: Drawn, selectors: np.ndarray, frequencies, sample_rate: int, block: int
) -> tuple[np.ndarray, np.ndarray]:
    """One row per signal, its selected frequency: LSTM inputs (S, NB, 2 + F) read from the
    signal's first sample, and the targets (S, NB, 2): the block means of the component's (I, Q)
    over the running scale the inputs are divided by."""
    s, n = drawn.mixed.shape
    n = n // block * block
    mixed = drawn.mixed[:, :n].astype(np.float64)
    x, scale, _, _ = window_inputs(mixed, np.full(s, n), selectors, frequencies, sample_rate,
                                   block)  # fmt: skip
    iq = drawn.iq[np.arange(s), selectors, :, :n] / scale[:, None, :]  # (S, 2, N)
    y = iq.reshape(s, 2, n // block, block).mean(axis=-1).transpose(0, 2, 1)
    return x, y.astype(np.float32)


def stream_tables(
    drawn: Drawn, frequencies, sample_rate: int, block: int
) -> tuple[np.ndarray, np.ndarray]:
    """Every signal read whole for every frequency: inputs (S, F, NB, 2 + F) and targets
    (S, F, NB, 2), which the carried training streams walk through block by block."""
    s = drawn.mixed.shape[0]
    xs, ys = [], []
    for i in range(len(frequencies)):
        x, y = rows(drawn, np.full(s, i), frequencies, sample_rate, block)
        xs.append(x)
        ys.append(y)
    return np.stack(xs, axis=1), np.stack(ys, axis=1)
