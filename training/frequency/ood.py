"""The out-of-distribution thresholds, each set on held-out signals of the served family
(handlers/frequency/family.py): the residual's (handlers/frequency/ood.py) on those drawn with
`TrainConfig.ood_seed`, the nonstationarity's and the offset's (handlers/frequency/
stationarity.py) on those drawn with `TrainConfig.stationarity_seed`; each a high quantile of the
figure times a margin (at least a floor), so that at most a few percent of in-family signals are
flagged."""

from __future__ import annotations

import numpy as np

from handlers.frequency import stationarity
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


STATIONARITY_SECONDS = (2, 3, 5)
"""The lengths the selection signals are drawn at, in turn (whole seconds: whole windows)."""


def stationarity_figures(
    signals, sample_rate: int, frequencies: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """(nonstationarity, offset) of each signal (whole windows, as served)."""
    ns, off = [], []
    for x in signals:
        m = stationarity.measures(stationarity.of_signal(x, sample_rate, frequencies),
                                  sample_rate, frequencies)  # fmt: skip
        if m.nonstationarity is not None and m.offset is not None:
            ns.append(m.nonstationarity)
            off.append(m.offset)
    return np.array(ns, dtype=np.float64), np.array(off, dtype=np.float64)


def stationarity_signals(cfg: TrainConfig, seed: int, count: int) -> list[np.ndarray]:
    family = Family(frequencies=tuple(cfg.signal.frequencies), sample_rate=cfg.signal.sample_rate)
    rng = np.random.default_rng(seed)
    rate = cfg.signal.sample_rate
    return [
        draw(rng, STATIONARITY_SECONDS[k % len(STATIONARITY_SECONDS)] * rate, family)[0]
        for k in range(count)
    ]


def stationarity_thresholds(cfg: TrainConfig) -> tuple[float, float]:
    """The manifest's (`nonstationarity_threshold`, `offset_threshold`), each in (0, 1]."""
    rate, freqs = cfg.signal.sample_rate, tuple(cfg.signal.frequencies)
    signals = stationarity_signals(cfg, cfg.stationarity_seed, cfg.stationarity_signals)
    ns, off = stationarity_figures(signals, rate, freqs)
    q, margin = cfg.ood_quantile, cfg.ood_margin
    return (
        float(min(max(np.quantile(ns, q) * margin, cfg.stationarity_min), 1.0)),
        float(min(max(np.quantile(off, q) * margin, cfg.offset_min), 1.0)),
    )
