"""The held-out questions `make check-served` asks the served sentiment model (training/common/heldout.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from training.common.heldout import HeldOut, Outcome, binomial_floor, compare_classified

REVIEWS = 48
"""Held-out IMDB reviews asked: 3 requests of 16 texts (the request limit)."""
TEXTS_PER_REQUEST = 16


def asked(sources) -> list[int]:
    """The test sample's rows check-served asks (the first REVIEWS IMDB reviews): training saves
    its per-item predictions for these (training/sentiment/pipeline.py)."""
    return [i for i, s in enumerate(sources) if s == "imdb"][:REVIEWS]


def served_check(manifest: dict, artifacts: Path) -> HeldOut:
    """The first REVIEWS IMDB reviews of the test sample training scored; at least as many right
    as a model with the report's held-out IMDB accuracy gets with probability 1 - ALPHA."""
    from training.sentiment.config import CONFIGS
    from training.sentiment.data import LABELS, load_splits

    metrics = manifest["metrics"]
    cfg = CONFIGS[metrics.get("config", "default")]
    # The test split and sample training scored (training/sentiment/pipeline.py), its IMDB reviews.
    test = load_splits(cfg.seed).test.sample(cfg.test_size, cfg.seed + 2)
    imdb = asked(test.source)
    texts, labels = [test.text[i] for i in imdb], [LABELS[int(test.label[i])] for i in imdb]
    bodies = [
        {"texts": texts[i : i + TEXTS_PER_REQUEST]} for i in range(0, len(texts), TEXTS_PER_REQUEST)
    ]
    accuracy = float(metrics["test_accuracy_imdb"])

    def judge(answers: list[Any], out: Outcome) -> None:
        got = [a["label"] for answer in answers for a in answer]
        right = sum(g == w for g, w in zip(got, labels, strict=True))
        need = binomial_floor(len(labels), accuracy)
        out.check(right >= need, f"{right}/{len(labels)} held-out IMDB reviews right "
                  f"(at least {need}: report's accuracy {accuracy:.4f})")  # fmt: skip

    def per_item(answers: list[Any], predicted: dict, out: Outcome, where: str) -> None:
        served = [a for answer in answers for a in answer]
        compare_classified(served, predicted, out, where, "the report's, on these reviews")

    return HeldOut(bodies, judge, per_item)
