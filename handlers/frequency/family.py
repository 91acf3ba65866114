"""The signals the frequency model serves: the family the out-of-distribution flag is set on.

The served family (docs/explanations.md, "Out of distribution"): at 1,000 Hz, a random subset
(one to four) of the 1, 3, 5 and 7 Hz components, each with its own amplitude in [0.3, 2.0] and
its own phase, summed, plus Gaussian noise of standard deviation 0.05-0.2. The truth of a
frequency is the component as it is in the mix (its amplitude and phase), zero when absent.

Training (training/frequency/ood.py) draws held-out signals of this family to set the flag's
threshold; the model itself is still trained on training/frequency/data.py's generator.
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
    """Standard deviation of the added Gaussian noise, uniform."""


SERVED = Family()


def draw(
    rng: np.random.Generator, n: int, family: Family = SERVED
) -> tuple[np.ndarray, np.ndarray]:
    """One signal of `n` samples: (mixed (n,) float32, components (F, n) float32: the truth)."""
    num_f = len(family.frequencies)
    f = np.asarray(family.frequencies, dtype=np.float64)[:, None]
    t = np.arange(n, dtype=np.float64) / family.sample_rate
    count = int(rng.integers(family.present[0], family.present[1] + 1))
    amplitude = np.zeros(num_f)
    chosen = rng.permutation(num_f)[:count]
    amplitude[chosen] = rng.uniform(*family.amplitude, size=count)
    phase = rng.uniform(0.0, 2 * np.pi, size=(num_f, 1))
    components = amplitude[:, None] * np.sin(2 * np.pi * f * t + phase)
    noise = rng.uniform(*family.noise)
    mixed = components.sum(axis=0) + rng.normal(0.0, 1.0, n) * noise
    return mixed.astype(np.float32), components.astype(np.float32)
