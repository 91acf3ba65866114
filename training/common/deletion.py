"""Deletion curves, the faithfulness check every model's explanations share: remove the k most
attributed input features and the target's score must drop more than when k random ones are
removed. Each model's `faithfulness` module measures its drops; this module summarises, prints,
plots and writes them the same way for all (docs/explanations.md).

The gate (`faithful`): per item, the top-k deletion's drop less the mean drop of its random
k-deletions (the same item's draws); the mean of that difference over the items, with a paired
bootstrap 95 % interval (items resampled), must have its lower end above zero. A ratio of the
two means says nothing where the random drop is at or below zero (any positive top drop is then
"infinitely" better), so it is reported only where the random drop is positive."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

RESAMPLES = 2000
LEVEL = 0.95


def paired_interval(
    differences: np.ndarray, seed: int = 0, resamples: int = RESAMPLES
) -> tuple[float, float]:
    """The percentile bootstrap LEVEL interval of the mean of per-item differences."""
    d = np.asarray(differences, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, d.size, size=(resamples, d.size))].mean(axis=1)
    tail = (1 - LEVEL) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def summary(ks: Sequence[int | str], top: dict, rand: dict, seed: int = 0) -> dict:
    """Per k: the mean drop of the top-k and the random-k deletions, the mean per-item difference
    (top less the mean of that item's random draws: `rand[k]` holds each item's draws in a row)
    with its paired bootstrap 95 % interval, whether the interval excludes zero from above
    (`faithful`), and the ratio of the means where the random drop is positive (else None)."""
    rows = {}
    for k in ks:
        t = np.asarray(top[k], dtype=np.float64)
        r = np.asarray(rand[k], dtype=np.float64)
        if t.size == 0 or r.size % t.size:
            raise ValueError(f"k={k}: {r.size} random drops for {t.size} items (draws per item?)")
        per_item = t - r.reshape(t.size, -1).mean(axis=1)
        lo, hi = paired_interval(per_item, seed)
        mt, mr = float(t.mean()), float(r.mean())
        rows[str(k)] = {
            "top": mt,
            "random": mr,
            "difference": float(per_item.mean()),
            "ci95": [lo, hi],
            "items": int(t.size),
            "draws": int(r.size // t.size),
            "faithful": lo > 0,
            "ratio": mt / mr if mr > 0 else None,
        }
    return rows


def unfaithful(rows: dict) -> list[str]:
    """The k whose interval does not exclude zero from above, each with its figure; empty: the
    gate passes."""
    return [
        f"k={k}: top-k less random-k drop {d['difference']:.4f}, 95 % interval "
        f"[{d['ci95'][0]:.4f}, {d['ci95'][1]:.4f}] over {d['items']} items does not exclude 0"
        for k, d in rows.items()
        if not d["faithful"]
    ]


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
    print(
        "| method | k | top-k drop | random drop | difference [95 % interval] | faithful "
        "| s/explanation | passes |"
    )
    print("|---|---:|---:|---:|---:|---|---:|---:|")
    for r in results:
        for k in ks:
            d = r["deletion"][str(k)]
            lo, hi = d["ci95"]
            print(
                f"| {r['label']} | {k} | {d['top']:.4f} | {d['random']:.4f} | "
                f"{d['difference']:.4f} [{lo:.4f}, {hi:.4f}] | {'yes' if d['faithful'] else 'NO'} | "
                f"{r['seconds_per_explanation']:.3f} | {r['evaluations_per_explanation']:.0f} |"
            )
