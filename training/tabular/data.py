"""scikit-learn's bundled breast-cancer records (569, 30 numeric features; no download), split
once, stratified and seeded: `test_fraction` held out, then `val_fraction` of the rest."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CLASSES = ("malignant", "benign")
"""load_breast_cancer's target_names, in target order."""


@dataclass(frozen=True)
class Split:
    records: list[dict[str, float]]
    """{feature name: value} per record, as a client sends them."""
    labels: np.ndarray
    """(N,) int64 index into CLASSES."""


def load_splits(
    test_fraction: float = 0.2, val_fraction: float = 0.15, seed: int = 0
) -> dict[str, Split]:
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    data = load_breast_cancer()
    x, y, names = data.data, data.target.astype(np.int64), [str(n) for n in data.feature_names]
    idx = np.arange(len(y))
    rest, test = train_test_split(idx, test_size=test_fraction, stratify=y, random_state=seed)
    fit, val = train_test_split(rest, test_size=val_fraction, stratify=y[rest], random_state=seed)

    def split(rows: np.ndarray) -> Split:
        return Split([dict(zip(names, map(float, x[i]), strict=True)) for i in rows], y[rows])

    return {"train": split(fit), "val": split(val), "test": split(test)}
