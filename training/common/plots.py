"""PNG figures for an artifact directory, drawn headless (Agg): training curve, reliability diagram."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen before pyplot loads)
import numpy as np  # noqa: E402

from training.common.calibration import ReliabilityBins  # noqa: E402


def _smooth(values: Sequence[float], window: int) -> np.ndarray:
    v = np.asarray(values, np.float64)
    if len(v) < window or window <= 1:
        return v
    return np.convolve(v, np.ones(window) / window, mode="valid")


def training_curve(
    steps: Sequence[int],
    loss: Sequence[float],
    accuracy: Sequence[float],
    path: str | Path,
    title: str = "training",
) -> Path:
    """Per-step loss and accuracy, raw (faint) and as a moving average."""
    window = max(1, len(steps) // 25)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, values, name in ((ax_loss, loss, "loss"), (ax_acc, accuracy, "batch accuracy")):
        ax.plot(steps, values, alpha=0.25, lw=0.8, label="per step")
        smooth = _smooth(values, window)
        ax.plot(
            np.asarray(steps)[window - 1 :][: len(smooth)],
            smooth,
            lw=1.8,
            label=f"mean of {window}",
        )
        ax.set_xlabel("step")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


def reliability_diagram(
    panels: dict[str, tuple[ReliabilityBins, float]], path: str | Path, title: str = "reliability"
) -> Path:
    """One panel per name: per-bin accuracy against confidence, the diagonal, and the ECE."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.0), squeeze=False)
    for ax, (name, (bins, ece)) in zip(axes[0], panels.items(), strict=True):
        centers = (bins.edges[:-1] + bins.edges[1:]) / 2
        width = np.diff(bins.edges)
        used = bins.count > 0
        ax.bar(
            centers[used],
            bins.accuracy[used],
            width=width[used],
            edgecolor="k",
            alpha=0.7,
            label="accuracy",
        )
        ax.plot(
            bins.confidence[used],
            bins.accuracy[used],
            "o",
            ms=3,
            color="C3",
            label="(confidence, accuracy)",
        )
        ax.plot([0, 1], [0, 1], "--", color="gray", lw=1)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("confidence")
        ax.set_ylabel("accuracy")
        ax.set_title(f"{name}  ECE={ece:.4f}")
        ax.legend(fontsize=8, loc="upper left")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
