"""Synthetic signals: the noisy mix of four sinusoids and the clean target of each.

mixed(t) = mean_i A_i(t) * sin(2*pi*f_i*t + phi_i(t)), with A_i(t) ~ U[0.8, 1.2] and
phi_i(t) ~ U[0, 2*pi*phase_noise) drawn independently at every sample; target_i(t) = sin(2*pi*f_i*t).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# The serving side's input layout (one selector, or one per row): one definition for both.
from handlers.frequency.engine import model_inputs
from training.frequency.config import SignalSpec

__all__ = ["Signal", "make_signal", "model_inputs", "sample_windows"]


@dataclass(frozen=True)
class Signal:
    t: np.ndarray
    """(N,) seconds."""
    mixed: np.ndarray
    """(N,) float32 noisy mix: the model's input."""
    targets: np.ndarray
    """(F, N) float32 clean sinusoid per frequency: the model's target."""


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


def sample_windows(
    signals: list[Signal], window: int, batch: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """A random batch of (window, frequency) pairs: inputs (B, L, 1+F), targets (B, L)."""
    num_f = signals[0].targets.shape[0]
    which = rng.integers(0, len(signals), size=batch)
    sel = rng.integers(0, num_f, size=batch)
    x = np.empty((batch, window, 1 + num_f), dtype=np.float32)
    y = np.empty((batch, window), dtype=np.float32)
    for b in range(batch):
        s = signals[which[b]]
        start = rng.integers(0, s.mixed.shape[0] - window + 1)
        x[b] = model_inputs(s.mixed[start : start + window], int(sel[b]), num_f)
        y[b] = s.targets[sel[b], start : start + window]
    return x, y
