"""A digits explanation as a PNG: the image the model saw beside its attribution heat map (green:
pixels that pushed toward the explained label, red: against it), `python -m clients explain
digits --png out.png`."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def render_png(grey: np.ndarray, explanation: dict, path: Path) -> Path:
    """`grey`: the request's image as (H, W) in [0, 1]; `explanation`: the JSON answer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    a = np.asarray(explanation["attributions"], dtype=np.float32)
    scale = float(np.abs(a).max()) or 1.0
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 3.6))
    left.imshow(grey, cmap="gray", vmin=0, vmax=1)
    left.set_title("input")
    shown = right.imshow(a, cmap="RdYlGn", vmin=-scale, vmax=scale)
    right.set_title(f"why {explanation['target']} (p={explanation.get('probability', 0):.2f})")
    fig.colorbar(shown, ax=right, fraction=0.046, label="attribution (log-odds)")
    for ax in (left, right):
        ax.set_xticks([])
        ax.set_yticks([])
    fig.suptitle(f"{explanation.get('method', '')}, {a.shape[0]}x{a.shape[1]} model-input pixels")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
