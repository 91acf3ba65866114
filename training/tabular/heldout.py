"""The held-out questions `make check-served` asks the served tabular model
(training/common/heldout.py): the whole test split, as {"records": [...]} bodies."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from training.common.heldout import HeldOut, Outcome, compare_classified

SLACK = 0.01
"""Served accuracy may trail the report's by this: a record on the boundary may flip between the
eager model the report scored and the export."""
RECORDS_PER_REQUEST = 64


def served_check(manifest: dict, artifacts: Path) -> HeldOut:
    from training.tabular.config import TrainConfig
    from training.tabular.data import CLASSES, load_splits

    path = artifacts / "metrics.json"
    cfg = json.loads(path.read_text()).get("config", {}) if path.is_file() else {}
    d = TrainConfig()
    test = load_splits(cfg.get("test_fraction", d.test_fraction),
                       cfg.get("val_fraction", d.val_fraction), cfg.get("split_seed", d.split_seed))["test"]  # fmt: skip
    records = test.records
    bodies = [
        {"records": records[i : i + RECORDS_PER_REQUEST]}
        for i in range(0, len(records), RECORDS_PER_REQUEST)
    ]
    accuracy = float(manifest["metrics"]["test_accuracy"])

    def judge(answers: list[Any], out: Outcome) -> None:
        got = [a["label"] for answer in answers for a in answer]
        want = [CLASSES[i] for i in test.labels.tolist()]
        right = sum(g == w for g, w in zip(got, want, strict=True))
        need = math.floor(len(got) * (accuracy - SLACK) + 1e-9)
        out.check(right >= need, f"{right}/{len(got)} held-out records right "
                  f"(at least {need}: report's accuracy {accuracy:.4f} - {SLACK})")  # fmt: skip

    def per_item(answers: list[Any], predicted: dict, out: Outcome, where: str) -> None:
        served = [a for answer in answers for a in answer]
        compare_classified(
            served, predicted, out, where, f"the report's test accuracy {accuracy:.4f}"
        )

    return HeldOut(bodies, judge, per_item)
