"""Are the digits explanations faithful? Pixel-deletion curves over the held-out test images.

For each of the last 297 images: explain the predicted label, set its k most attributed input
pixels to 0 (no ink; k = 2, 4, 8) and measure the drop of the label's calibrated probability;
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

from handlers.digits.explain import METHODS, DigitsExplainer
from handlers.digits.pixels import resize
from training.common.deletion import plot, report, summary

KS = (2, 4, 8)


def evaluate(explainer: DigitsExplainer, greys: np.ndarray, draws: int, seed: int) -> list[dict]:
    p = explainer.predictor
    export = p.settings.export
    _, h, w = export.input_shape
    rng = np.random.default_rng(seed)
    top: dict[int, list[float]] = {k: [] for k in KS}
    anywhere: dict[int, list[float]] = {k: [] for k in KS}
    inked: dict[int, list[float]] = {k: [] for k in KS}
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
        for k in KS:
            for kind, picks in [("top", [order[:k]])] + [
                ("any", [rng.choice(x.size, k, replace=False) for _ in range(draws)]),
                ("ink", [rng.choice(ink, min(k, ink.size), replace=False) for _ in range(draws)]),
            ]:
                for pick in picks:
                    y = x.copy()
                    y[pick] = 0.0
                    edited.append(y.reshape(h, w))
                    owners.append((kind, k))
        probs = [c.probabilities[ex.target] for c in p.classify(edited)]
        for (kind, k), q in zip(owners, probs, strict=True):
            {"top": top, "any": anywhere, "ink": inked}[kind][k].append(ex.probability - q)
    base = {
        "seconds_per_explanation": float(np.mean(seconds)),
        "evaluations_per_explanation": float(np.mean(passes)),
        "images": len(greys),
    }
    name = f"{explainer.method}" + (
        f" ({explainer.samples} samples)" if explainer.method == "shapley" else ""
    )
    return [
        base | {"label": name, "method": explainer.method, "deletion": summary(KS, top, anywhere),
                "random_label": f"random pixels ({name})" if explainer.method == METHODS[0] else None},
        base | {"label": f"{name} vs random inked pixels", "method": explainer.method,
                "deletion": summary(KS, top, inked), "random_label":
                f"random inked pixels ({name})" if explainer.method == METHODS[0] else None},
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--artifacts", type=Path, default=Path("artifacts/digits"))
    ap.add_argument("--out", type=Path, default=Path("reports/explanations"))
    ap.add_argument("--draws", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from handlers.digits.predict import DigitsPredictor
    from training.common.machine import cpu_summary, describe_cpu
    from training.digits.data import load_splits

    p = DigitsPredictor.from_dir(args.artifacts, {"threads": 1}, name="digits")
    greys = load_splits()["test"].greys
    results = [
        r for m in METHODS for r in evaluate(DigitsExplainer(p, m), greys, args.draws, args.seed)
    ]
    meta = {"model": dict(p.model_info), "cpu": cpu_summary(describe_cpu())}
    report(args.out, "digits", results, KS, meta)
    plot(results, KS, args.out / "digits_deletion.png", f"Digits pixel deletion, {len(greys)} held-out images",
         "input pixels set to 0 (k)", "mean drop of the predicted label's probability")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
