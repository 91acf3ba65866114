"""PNG plots: what is served per frequency, and how the error falls along a zero-state window."""

from __future__ import annotations

from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from training.frequency.config import TrainConfig  # noqa: E402
from training.frequency.model import FrequencyLSTM  # noqa: E402
from training.frequency.quality import held_out, stream_mode, windows_mode  # noqa: E402


def plot_components(model: FrequencyLSTM, cfg: TrainConfig, path: Path, signals: int = 3):
    """Held-out served-family signals: per frequency the truth, the windowed answer with its
    +-2 std band and the stream's answer; absent components included (their truth is zero)."""
    drawn = held_out(cfg, cfg.test_seed, signals)
    num_f = len(cfg.signal.frequencies)
    sel = tuple(range(num_f))
    fig, axes = plt.subplots(num_f, signals, figsize=(5 * signals, 2.2 * num_f), squeeze=False)
    t = np.arange(drawn.mixed.shape[1]) / cfg.signal.sample_rate
    for k in range(signals):
        out, std = windows_mode(model, cfg, drawn.mixed[k], sel)
        stream, _ = stream_mode(model, cfg, drawn.mixed[k], sel)
        for i, f in enumerate(cfg.signal.frequencies):
            ax = axes[i, k]
            truth = drawn.components[k, i]
            ax.plot(t, drawn.mixed[k], color="0.85", lw=0.5, label="mixed input")
            ax.plot(t, truth, color="k", lw=1.6, label="truth")
            ax.plot(t, out[i], color="tab:red", lw=1.0, label="windows")
            ax.fill_between(t, out[i] - 2 * std[i], out[i] + 2 * std[i], color="tab:red",
                            alpha=0.25, label="+-2 std")  # fmt: skip
            ax.plot(t, stream[i], color="tab:blue", lw=1.0, ls="--", label="stream")
            state = "present" if np.any(truth) else "absent"
            ax.set_title(f"signal {k}, {f:g} Hz ({state})", fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", fontsize=8, ncol=5)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path, dpi=90)
    plt.close(fig)
