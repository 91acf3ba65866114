"""A tabular explanation as a PNG: each feature's attribution as a bar (green: toward the
explained label, red: against it), the largest first, features outside the training ranges
marked; `python -m clients explain tabular --record a.json --png why.png`."""

from __future__ import annotations

from pathlib import Path

SHOWN = 15
"""Features drawn: the largest attributions by magnitude."""


def render_png(explanation: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ranked = sorted(explanation["attributions"].items(), key=lambda kv: -abs(kv[1]))[:SHOWN][::-1]
    outside = set(explanation.get("out_of_range", ()))
    names = [f"{n} (outside the training range)" if n in outside else n for n, _ in ranked]
    values = [v for _, v in ranked]
    fig, ax = plt.subplots(figsize=(7.5, 0.3 * len(ranked) + 1.4))
    ax.barh(names, values, color=["C2" if v > 0 else "C3" for v in values])
    ax.axvline(0, color="k", linewidth=0.8)
    ax.set_xlabel(f"attribution to the log-odds of {explanation['target']} (vs the training mean)")
    ax.set_title(f"why {explanation['target']} (p={explanation.get('probability', 0):.2f}), "
                 f"{explanation.get('method', '')}")  # fmt: skip
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
