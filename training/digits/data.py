"""scikit-learn's bundled handwritten digits (1,797 8x8 images, values 0..16; no download), split
by position: the first 1,500 images train and validate, the last 297 are the test split."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PIXEL_MAX = 16.0
"""load_digits' value scale: 0 (background) .. 16 (ink)."""
NATIVE_SIZE = (8, 8)
CLASSES = tuple(str(d) for d in range(10))


@dataclass(frozen=True)
class Split:
    greys: np.ndarray
    """(N, 8, 8) float32 in [0, 1]: the dataset's value / 16, bright strokes on dark."""
    labels: np.ndarray
    """(N,) int64 digit."""


def load_splits(train_images: int = 1500, val_images: int = 150) -> dict[str, Split]:
    from sklearn.datasets import load_digits

    digits = load_digits()
    greys = (digits.images / PIXEL_MAX).astype(np.float32)
    labels = digits.target.astype(np.int64)
    fit = train_images - val_images
    return {
        "train": Split(greys[:fit], labels[:fit]),
        "val": Split(greys[fit:train_images], labels[fit:train_images]),
        "test": Split(greys[train_images:], labels[train_images:]),
    }
