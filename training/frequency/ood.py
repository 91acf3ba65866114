"""The out-of-distribution threshold (handlers/frequency/ood.py), set on held-out signals of the
served family (handlers/frequency/family.py) drawn with `TrainConfig.ood_seed`: a high quantile of
their residuals times a margin, so that at most a few percent of in-family signals are flagged."""

from __future__ import annotations

import numpy as np

from handlers.frequency.family import Family, draw
from handlers.frequency.ood import residual
from training.frequency.config import TrainConfig


def residuals(signals, sample_rate: int, frequencies: tuple[float, ...]) -> np.ndarray:
    res = [residual(x, sample_rate, frequencies) for x in signals]
    return np.array([r for r in res if r is not None], dtype=np.float64)


def in_family(cfg: TrainConfig, seed: int, count: int) -> list[np.ndarray]:
    family = Family(frequencies=tuple(cfg.signal.frequencies), sample_rate=cfg.signal.sample_rate)
    rng = np.random.default_rng(seed)
    return [draw(rng, cfg.ood_samples, family)[0] for _ in range(count)]


def ood_threshold(cfg: TrainConfig) -> float:
    """The manifest's `ood_threshold`, in (0, 1]."""
    rate, freqs = cfg.signal.sample_rate, tuple(cfg.signal.frequencies)
    res = residuals(in_family(cfg, cfg.ood_seed, cfg.ood_signals), rate, freqs)
    return float(min(np.quantile(res, cfg.ood_quantile) * cfg.ood_margin, 1.0))
