"""A frequency explanation as a PNG: per explained frequency, the input signal, the extracted
component, and the attribution of each input sample under them (`python -m clients explain
frequency --png out.png`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def render_png(
    signal: np.ndarray, sample_rate: float, prediction: dict, explanation: dict, path: Path
) -> Path:
    """`prediction`: the JSON answer of /predictions for the same body (the components);
    `explanation`: the JSON answer of /explanations."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    freqs = explanation["frequencies"]
    attributions = np.asarray(explanation["attributions"], dtype=np.float32)
    t = np.arange(len(signal)) / sample_rate
    comps = {float(c["frequency"]): np.asarray(c["signal"]) for c in prediction["components"]}
    fig, axes = plt.subplots(2 * len(freqs), 1, figsize=(10, 2.6 * len(freqs)), sharex=True)
    axes = np.atleast_1d(axes)
    for j, f in enumerate(freqs):
        top, bottom = axes[2 * j], axes[2 * j + 1]
        top.plot(t, signal, color="0.7", lw=0.8, label="input")
        top.plot(t, comps[float(f)], color="tab:blue", lw=1.2, label=f"{f:g} Hz component")
        top.legend(loc="upper right", fontsize=8)
        a = attributions[j]
        bottom.fill_between(t, 0, a, where=a >= 0, color="tab:green", step="mid", label="drives it")
        bottom.fill_between(
            t, 0, a, where=a < 0, color="tab:red", step="mid", label="works against it"
        )
        bottom.axhline(0, color="k", lw=0.5)
        bottom.set_ylabel("attribution", fontsize=8)
        bottom.legend(loc="upper right", fontsize=8)
    axes[-1].set_xlabel("time (s)")
    fig.suptitle(f"Which samples drive each component ({explanation.get('method', '')})")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
