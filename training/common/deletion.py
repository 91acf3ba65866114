"""Deletion curves, the faithfulness check every model's explanations share: remove the k most
attributed input features and the target's score must drop more than when k random ones are
removed. Each model's `faithfulness` module measures its drops; this module summarises, prints,
plots and writes them the same way for all (docs/explanations.md)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def summary(ks: Sequence[int | str], top: dict, rand: dict) -> dict:
    """Mean drop per k for the top-k and random-k deletions, and their ratio."""
    rows = {}
    for k in ks:
        t, r = float(np.mean(top[k])), float(np.mean(rand[k]))
        rows[str(k)] = {"top": t, "random": r, "ratio": t / r if r > 0 else float("inf")}
    return rows


def plot(
    results: list[dict], ks: Sequence[int | str], path: Path, title: str, xlabel: str, ylabel: str
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    # k may be a share ("10%"): then the points are evenly spaced and labelled with their k.
    shares = any(isinstance(k, str) for k in ks)
    xs = list(range(len(ks) + 1)) if shares else [0, *ks]
    for r in results:
        ax.plot(xs, [0] + [r["deletion"][str(k)]["top"] for k in ks], marker="o",
                label=f"top-k, {r['label']}")  # fmt: skip
    for r in results:
        if r.get("random_label"):
            ax.plot(xs, [0] + [r["deletion"][str(k)]["random"] for k in ks], "--", marker="x",
                    label=r["random_label"])  # fmt: skip
    if shares:
        ax.set_xticks(xs, ["0", *map(str, ks)])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def report(out: Path, name: str, results: list[dict], ks: Sequence[int | str], meta: dict) -> None:
    """Write <name>_faithfulness.json and print the markdown table (with the CPU)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}_faithfulness.json").write_text(
        json.dumps(meta | {"results": results}, indent=2)
    )
    print(f"CPU: {meta.get('cpu')}")
    print("| method | k | top-k drop | random drop | ratio | s/explanation | passes |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        for k in ks:
            d = r["deletion"][str(k)]
            print(
                f"| {r['label']} | {k} | {d['top']:.4f} | {d['random']:.4f} | {d['ratio']:.2f} | "
                f"{r['seconds_per_explanation']:.3f} | {r['evaluations_per_explanation']:.0f} |"
            )
