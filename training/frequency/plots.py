"""PNG plots: target vs model output per frequency, with the MC-dropout ±2 std band."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from training.frequency.config import TrainConfig  # noqa: E402
from training.frequency.data import Signal  # noqa: E402
from training.frequency.model import FrequencyLSTM  # noqa: E402
from training.frequency.train import predict_stitched  # noqa: E402


def plot_components(
    model: FrequencyLSTM, signal: Signal, cfg: TrainConfig, path: Path, seconds: float = 2.0
):
    head = model.head()
    masks = head.masks(cfg.mc_samples, seed=0)
    n = int(seconds * cfg.signal.sample_rate)
    fig, axes = plt.subplots(
        len(cfg.signal.frequencies), 1, figsize=(10, 2.2 * len(cfg.signal.frequencies))
    )
    for i, (ax, f) in enumerate(zip(axes, cfg.signal.frequencies, strict=True)):
        out, std = predict_stitched(model, signal, cfg, i, masks)
        t, out, std, target = signal.t[:n], out[:n], std[:n], signal.targets[i, :n]
        ax.plot(t, signal.mixed[:n], color="0.8", lw=0.6, label="mixed input")
        ax.plot(t, target, color="k", lw=1.2, label="target")
        ax.plot(t, out, color="tab:red", lw=1.0, label="LSTM (stitched windows)")
        ax.fill_between(
            t,
            out - 2 * std,
            out + 2 * std,
            color="tab:red",
            alpha=0.25,
            label="±2 std (MC dropout)",
        )
        ax.set_ylabel(f"{f:g} Hz")
    axes[0].legend(loc="upper right", fontsize=7, ncol=4)
    axes[-1].set_xlabel("t (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
