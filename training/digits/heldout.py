"""The held-out questions `make check-served` asks the served digits model (training/common/heldout.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from training.common.heldout import HeldOut, Outcome, compare_classified

SLACK = 0.01
"""Served accuracy on the whole test split may trail the report's by this (3 images of 297): an
image on the boundary may flip between the eager model the report scored and the export."""
IMAGES_PER_REQUEST = 64


def served_check(manifest: dict, artifacts: Path) -> HeldOut:
    """The whole held-out test split (the last 297 images); the report's accuracy, less SLACK."""
    from training.digits.data import PIXEL_MAX, load_splits

    path = artifacts / "metrics.json"
    config = json.loads(path.read_text()).get("config", {}) if path.is_file() else {}
    test = load_splits(config.get("train_images", 1500), config.get("val_images", 150))["test"]
    grids = np.rint(test.greys * PIXEL_MAX).astype(int).tolist()  # the dataset's own 0..16 values
    bodies = [
        {"images": grids[i : i + IMAGES_PER_REQUEST]}
        for i in range(0, len(grids), IMAGES_PER_REQUEST)
    ]
    accuracy = float(manifest["metrics"]["test_accuracy"])

    def judge(answers: list[Any], out: Outcome) -> None:
        got = [int(a["label"]) for answer in answers for a in answer]
        right = int(sum(g == w for g, w in zip(got, test.labels.tolist(), strict=True)))
        need = math.floor(len(got) * (accuracy - SLACK) + 1e-9)
        out.check(right >= need, f"{right}/{len(got)} held-out digits right "
                  f"(at least {need}: report's accuracy {accuracy:.4f} - {SLACK})")  # fmt: skip

    def per_item(answers: list[Any], predicted: dict, out: Outcome, where: str) -> None:
        served = [a for answer in answers for a in answer]
        compare_classified(
            served, predicted, out, where, f"the report's test accuracy {accuracy:.4f}"
        )

    return HeldOut(bodies, judge, per_item)
