"""The signals the frequency model serves: the family the out-of-distribution flag is set on.

The served family (docs/explanations.md, "Out of distribution"): at 1,000 Hz, a random subset
(one to four) of the 1, 3, 5 and 7 Hz components, each with its own amplitude in [0.3, 2.0] and
its own phase, summed, plus Gaussian noise of standard deviation 0.05-0.2. The truth of a
frequency is the component as it is in the mix (its amplitude and phase), zero when absent.

Training draws from a wider family (`TRAINING`: noise from 0, a slowly drifting phase, and a
quarter of the signals averaged over the frequencies instead of summed, as the first recipe's
generator mixed them); held-out signals of `SERVED` drawn with other seeds set the
out-of-distribution threshold (training/frequency/ood.py) and measure the quality floors
(training/frequency/quality.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FREQUENCIES = (1.0, 3.0, 5.0, 7.0)
SAMPLE_RATE = 1000


@dataclass(frozen=True)
class Family:
    """A family of mixed signals; `SERVED` is the one documented."""

    frequencies: tuple[float, ...] = FREQUENCIES
    sample_rate: int = SAMPLE_RATE
    present: tuple[int, int] = (1, 4)
    """How many of the frequencies are present (a uniform count, then a random subset)."""
    amplitude: tuple[float, float] = (0.3, 2.0)
    """Each present component's amplitude, uniform."""
    noise: tuple[float, float] = (0.05, 0.2)
    """Standard deviation of the added Gaussian noise (per unit of mixing scale), uniform."""
    drift: float = 0.0
    """Largest phase drift, rad/s: each component's phase moves linearly at a rate drawn from
    [-drift, drift] (0.3 rad/s is a 0.05 Hz offset)."""
    mean_mixing: float = 0.0
    """Share of signals averaged over the frequencies instead of summed."""


SERVED = Family()
TRAINING = Family(noise=(0.0, 0.25), drift=0.3, mean_mixing=0.25)


def draw(
    rng: np.random.Generator, n: int, family: Family = SERVED
) -> tuple[np.ndarray, np.ndarray]:
    """One signal of `n` samples: (mixed (n,) float32, components (F, n) float32: the truth)."""
    mixed, components, _ = draw_parts(rng, n, family)
    return mixed, components


def draw_parts(
    rng: np.random.Generator, n: int, family: Family = SERVED
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`draw`, with each component's in-phase and quadrature amplitudes (F, 2, n) float64 against
    its reference oscillator sin(2*pi*f*t), cos(2*pi*f*t): component = I*sin + Q*cos."""
    num_f = len(family.frequencies)
    f = np.asarray(family.frequencies, dtype=np.float64)[:, None]
    t = np.arange(n, dtype=np.float64) / family.sample_rate
    count = int(rng.integers(family.present[0], family.present[1] + 1))
    amplitude = np.zeros(num_f)
    chosen = rng.permutation(num_f)[:count]
    amplitude[chosen] = rng.uniform(*family.amplitude, size=count)
    phase = rng.uniform(0.0, 2 * np.pi, size=(num_f, 1))
    if family.drift:
        phase = phase + rng.uniform(-family.drift, family.drift, size=(num_f, 1)) * t
    scale = 1.0 / num_f if family.mean_mixing and rng.random() < family.mean_mixing else 1.0
    iq = (
        scale
        * amplitude[:, None, None]
        * np.stack([np.cos(phase) * np.ones_like(t), np.sin(phase) * np.ones_like(t)], axis=1)
    )
    theta = 2 * np.pi * f * t
    components = iq[:, 0] * np.sin(theta) + iq[:, 1] * np.cos(theta)
    noise = rng.uniform(*family.noise) * scale
    mixed = components.sum(axis=0) + rng.normal(0.0, 1.0, n) * noise
    return mixed.astype(np.float32), components.astype(np.float32), iq
