"""PNG plots of the test split: the confusion matrix and a grid of sample predictions."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def confusion(labels: np.ndarray, predicted: np.ndarray, classes: int = 10) -> np.ndarray:
    m = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(m, (labels, predicted), 1)
    return m


def plot_confusion(matrix: np.ndarray, path: Path, title: str) -> Path:
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    im = ax.imshow(matrix, cmap="Blues")
    for (i, j), n in np.ndenumerate(matrix):
        if n:
            color = "white" if n > matrix.max() / 2 else "black"
            ax.text(j, i, str(n), ha="center", va="center", fontsize=8, color=color)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_xticks(range(matrix.shape[0]))
    ax.set_yticks(range(matrix.shape[0]))
    ax.set_title(title)
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def plot_samples(
    greys: np.ndarray, labels: np.ndarray, predicted: np.ndarray, confidence: np.ndarray, path: Path
) -> Path:
    """The test split's errors first, then correct answers: 32 tiles with true/predicted labels."""
    order = np.concatenate(
        [np.flatnonzero(predicted != labels), np.flatnonzero(predicted == labels)]
    )
    fig, axes = plt.subplots(4, 8, figsize=(10, 5.6))
    for ax, i in zip(axes.ravel(), order[:32], strict=False):
        ax.imshow(greys[i], cmap="gray", vmin=0, vmax=1)
        wrong = predicted[i] != labels[i]
        ax.set_title(f"{labels[i]}→{predicted[i]} ({confidence[i]:.2f})", fontsize=8,
                     color="C3" if wrong else "black")  # fmt: skip
        ax.axis("off")
    for ax in axes.ravel()[len(order) :]:
        ax.axis("off")
    fig.suptitle("test digits: true→predicted (calibrated confidence); errors first, in red")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
