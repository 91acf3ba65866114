"""PNG plots: what is served per frequency, and how the error falls along a zero-state window."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from handlers.frequency.windowing import taper  # noqa: E402
from training.frequency.config import TrainConfig  # noqa: E402
from training.frequency.data import Signal  # noqa: E402
from training.frequency.model import FrequencyLSTM  # noqa: E402
from training.frequency.train import (  # noqa: E402
    error_by_position,
    predict_stitched,
    predict_stream,
)


def plot_components(
    model: FrequencyLSTM, signal: Signal, cfg: TrainConfig, path: Path, seconds: float = 2.0
):
    """Target, the windowed (stitched) answer with its ±2 std band, and the stateful stream's
    answer, on the first seconds of the signal; the titles carry each mode's MSE over all of it."""
    head = model.head()
    masks = head.masks(cfg.mc_samples, seed=0)
    n = int(seconds * cfg.signal.sample_rate)
    fig, axes = plt.subplots(
        len(cfg.signal.frequencies), 1, figsize=(11, 2.4 * len(cfg.signal.frequencies))
    )
    for i, (ax, f) in enumerate(zip(axes, cfg.signal.frequencies, strict=True)):
        out, std = predict_stitched(model, signal, cfg, i, masks)
        stream = predict_stream(model, signal, i)
        target = signal.targets[i]
        mse_w = float(np.mean((out - target) ** 2))
        mse_s = float(np.mean((stream - target) ** 2))
        t = signal.t[:n]
        ax.plot(t, signal.mixed[:n], color="0.8", lw=0.6, label="mixed input")
        ax.plot(t, target[:n], color="k", lw=1.6, label="target")
        ax.plot(t, out[:n], color="tab:red", lw=1.0, label="windowed (stitched)")
        ax.fill_between(t, out[:n] - 2 * std[:n], out[:n] + 2 * std[:n], color="tab:red",
                        alpha=0.25, label="±2 std (MC dropout)")  # fmt: skip
        ax.plot(t, stream[:n], color="tab:blue", lw=1.0, ls="--", label="stateful stream")
        ax.set_ylabel(f"{f:g} Hz")
        ax.set_ylim(-1.6, 1.6)
        ax.set_title(
            f"{f:g} Hz: test MSE windowed {mse_w:.4f}, stateful {mse_s:.4f} "
            f"(over {signal.t[-1] + 1 / cfg.signal.sample_rate:g} s)",
            fontsize=9,
        )
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", fontsize=8, ncol=5)
    axes[-1].set_xlabel("t (s)")
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_window_error(model: FrequencyLSTM, signal: Signal, cfg: TrainConfig, path: Path):
    """MSE by position in a window run from a zero state, with the stitching taper beside it:
    the taper should stay low where the error is high."""
    err = error_by_position(model, signal, cfg.window)
    fig, ax = plt.subplots(figsize=(8, 3.6))
    pos = np.arange(cfg.window)
    for i, f in enumerate(cfg.signal.frequencies):
        ax.plot(pos, err[i], lw=1.2, label=f"{f:g} Hz")
    ax.set_yscale("log")
    ax.set_xlabel("position in window (samples)")
    ax.set_ylabel("test MSE")
    w = ax.twinx()
    w.plot(pos, taper(cfg.window), color="0.5", ls=":", label="stitching taper")
    w.set_ylabel("taper weight")
    w.set_ylim(0, 1.05)
    ax.legend(loc="upper center", fontsize=8, ncol=4)
    w.legend(loc="lower left", fontsize=8)
    ax.set_title("Error along a window started from a zero state", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
