"""A held-out generator of signals that change in time, for the frequency model's judge (tests
only: training never draws from it, nor from its seeds).

Its own code, not handlers/frequency/family.py: at 1,000 Hz, one to three of the 1, 3, 5 and 7 Hz
components, each with its own amplitude in [0.3, 2.0] and phase, plus Gaussian noise of standard
deviation 0.05-0.2 (`control`: the served family), and the conditions the served family never has:

* `step`: the whole signal's amplitude times 3 or divided by 3 half-way;
* `switch_on`: a component of a frequency not otherwise present switches on after 1 s;
* `off_grid`: the 3 Hz component at 3.2 Hz instead (present, with one to two others);
* `offset`: a constant offset of 0.5-2 (either sign).

Each draw returns the mix and its truth per served frequency (F, n): the component as it is in the
mix (zero where it is off; for `off_grid`, the 3.2 Hz component is the truth of 3 Hz, the answer
a reader wants), so an answer's band can be held against it.
"""

from __future__ import annotations

import numpy as np

RATE = 1000
FREQUENCIES = (1.0, 3.0, 5.0, 7.0)
CONDITIONS = ("step", "switch_on", "off_grid", "offset")


def _components(
    rng: np.random.Generator, n: int, chosen, hz: dict[int, float] | None = None
) -> np.ndarray:
    t = np.arange(n) / RATE
    truth = np.zeros((len(FREQUENCIES), n))
    for j in chosen:
        f = (hz or {}).get(int(j), FREQUENCIES[j])
        truth[j] = rng.uniform(0.3, 2.0) * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
    return truth


def _noise(rng: np.random.Generator, n: int) -> np.ndarray:
    return rng.normal(0.0, rng.uniform(0.05, 0.2), n)


def draw(rng: np.random.Generator, condition: str, n: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """(mix (n,) float32, truth (F, n) float64) of `condition` ("control" or one of CONDITIONS)."""
    order = rng.permutation(len(FREQUENCIES))
    k = int(rng.integers(1, 4))
    if condition == "off_grid":
        others = [j for j in order if j != 1][: k - 1] if k > 1 else []
        truth = _components(rng, n, [1, *others], {1: 3.2})
    else:
        truth = _components(rng, n, order[:k])
    if condition == "step":
        gain = 3.0 if rng.random() < 0.5 else 1.0 / 3.0
        truth[:, n // 2 :] *= gain
    elif condition == "switch_on":
        new = int(order[k])  # not otherwise present
        late = _components(rng, n, [new])
        late[:, :RATE] = 0.0
        truth = truth + late
    mix = truth.sum(axis=0) + _noise(rng, n)
    if condition == "offset":
        mix = mix + rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0)
    elif condition not in ("control", "step", "switch_on", "off_grid"):
        raise ValueError(condition)
    return mix.astype(np.float32), truth
