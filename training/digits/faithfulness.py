"""Are the digits explanations faithful? Pixel-deletion curves over the held-out test images.

For each of the last 297 images: explain the predicted label, set its k most attributed input
pixels to 0 (no ink; k = 2, 3, 4, 8 and 10 % of the pixels) and measure the drop of the label's calibrated probability;
the same with k random pixels, drawn among all input pixels and, stricter, among inked ones.

    python -m training.digits.faithfulness --artifacts artifacts/digits --out reports/explanations
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from handlers.kits.image.explain import METHODS, PixelExplainer
from handlers.kits.image.reading import resize
from training.common.deletion import plot, report, summary

KS: tuple[int | str, ...] = (2, 3, 4, 8, "10%")
GATED: tuple[int | str, ...] = (3, "10%")
"""The k the faithfulness gate holds (training/common/deletion.unfaithful)."""


def pixels_for(k: int | str, n: int) -> int:
    """k pixels, or a share of the n input pixels ("10%")."""
    return max(1, round(n * float(k.rstrip("%")) / 100)) if isinstance(k, str) else min(k, n)


def evaluate(explainer: PixelExplainer, greys: np.ndarray, draws: int, seed: int) -> list[dict]:
    p = explainer.predictor
    export = p.settings.export
    _, h, w = export.input_shape
    rng = np.random.default_rng(seed)
    top: dict[str, list[float]] = {str(k): [] for k in KS}
    anywhere: dict[str, list[float]] = {str(k): [] for k in KS}
    inked: dict[str, list[float]] = {str(k): [] for k in KS}
    seconds, passes = [], []
    for grey in tqdm(greys, desc=explainer.method, unit="image"):
        t0 = time.perf_counter()
        ex = explainer.explain(grey)
        seconds.append(time.perf_counter() - t0)
        passes.append(ex.evaluations)
        x = resize(grey, h, w).reshape(-1)
        order = np.argsort(-ex.attributions.reshape(-1), kind="stable")
        ink = np.flatnonzero(x > 0)
        edited, owners = [], []
        for key in KS:
            k = pixels_for(key, x.size)
            for kind, picks in [("top", [order[:k]])] + [
                ("any", [rng.choice(x.size, k, replace=False) for _ in range(draws)]),
                ("ink", [rng.choice(ink, min(k, ink.size), replace=False) for _ in range(draws)]),
            ]:
                for pick in picks:
                    y = x.copy()
                    y[pick] = 0.0
                    edited.append(y.reshape(h, w))
                    owners.append((kind, str(key)))
        probs = [c.probabilities[ex.target] for c in p.classify(edited)]
        for (kind, key_), q in zip(owners, probs, strict=True):
            {"top": top, "any": anywhere, "ink": inked}[kind][key_].append(ex.probability - q)
    base = {
        "seconds_per_explanation": float(np.mean(seconds)),
        "evaluations_per_explanation": float(np.mean(passes)),
        "images": len(greys),
    }
    name = f"{explainer.method}" + (
        f" ({explainer.samples} samples)" if explainer.method == "shapley" else ""
    )
    return [
        base | {"label": name, "method": explainer.method, "deletion": summary([str(k) for k in KS], top, anywhere),
                "random_label": f"random pixels ({name})" if explainer.method == METHODS[0] else None},
        base | {"label": f"{name} vs random inked pixels", "method": explainer.method,
                "deletion": summary([str(k) for k in KS], top, inked), "random_label":
                f"random inked pixels ({name})" if explainer.method == METHODS[0] else None},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--artifacts", type=Path, default=Path("artifacts/digits"))
    ap.add_argument("--out", type=Path, default=Path("reports/explanations"))
    ap.add_argument("--draws", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from handlers.digits.predict import DigitsPredictor
    from training.common.machine import cpu_summary, describe_cpu
    from training.digits.data import load_splits

    p = DigitsPredictor.from_dir(args.artifacts, {"threads": 1}, name="digits")
    greys = load_splits()["test"].greys
    results = [
        r for m in METHODS for r in evaluate(PixelExplainer(p, m), greys, args.draws, args.seed)
    ]
    meta = {"model": dict(p.model_info), "cpu": cpu_summary(describe_cpu())}
    report(args.out, "digits", results, KS, meta)
    plot(results, KS, args.out / "digits_deletion.png", f"Digits pixel deletion, {len(greys)} held-out images",
         "input pixels set to 0 (k, or a share of them)", "mean drop of the predicted label's probability")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
