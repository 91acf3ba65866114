"""What `make check-served` (deploy/check_served.py) asks a served model: each model's
training package has a `heldout.py` whose `served_check(manifest, artifacts)` gives the requests,
made from the training code's own held-out split, and judges the served answers against the
dataset's labels and the training report's figures."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

ALPHA = 1e-3
"""A model as good as its report misses a binomial bar (`binomial_floor`) this rarely."""


@dataclass
class Outcome:
    model: str
    lines: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def check(self, ok: bool, what: str) -> None:
        (self.lines if ok else self.failures).append(what)


@dataclass(frozen=True)
class HeldOut:
    """One model's held-out requests and how its answers are judged."""

    bodies: list[dict]
    """JSON request bodies, sent one after another (each also a row of the MLflow PyFunc)."""
    judge: Callable[[list[Any], Outcome], None]
    """Checks the served answers (one per body) against the known truth, into the Outcome."""
    per_item: Callable[[list[Any], dict, Outcome, str], None] | None = None
    """Compares answers (one per body) item by item with training's per-item predictions for
    the runtime that answered (`read_predictions(...)["runtimes"][key]`), naming `where`."""


def binomial_floor(n: int, p: float, alpha: float = ALPHA) -> int:
    """The largest k with P(X < k) <= alpha for X ~ Binomial(n, p): the count of right answers
    a model whose accuracy is p reaches on n held-out items but with probability alpha."""
    below, k = 0.0, 0
    for i in range(n + 1):
        if below > alpha:
            break
        k = i
        below += math.comb(n, i) * p**i * (1 - p) ** (n - i)
    return k


# Per-item predictions: what training itself predicted for the items check-served asks, saved
# beside the export (PREDICTIONS_FILE, its sha256 in the manifest's `predictions` block), so each
# served answer is compared with its own item, not only a count of right answers with a bar.

PREDICTIONS_FILE = "heldout_predictions.json"
PROBABILITY_ATOL = 1e-3
"""A served probability (of the predicted label) may differ from training's by this: training's
figures come from the eager model (sentiment: the ONNX files, as served), which the parity gates
hold to about 1e-5 of the exports; a model whose weights or bias moved shifts them far more."""
FP32 = "fp32"
INT8 = "int8"


def runtime_key(runtime: str) -> str:
    """The predictions a served runtime answers as: onnx-int8 its own, every other (fp32 ONNX,
    TorchScript, parity-checked against the eager model) training's fp32 ones."""
    return INT8 if runtime == "onnx-int8" else FP32


def write_predictions(out, model: str, split: str, made_by: str, runtimes: dict) -> dict:
    """Write out/PREDICTIONS_FILE; returns the manifest's `predictions` block (file, sha256,
    items, and each runtime's right answers). `runtimes`: key (FP32, INT8) -> {"items": [...],
    "allowed_label_differences": int, "why": str}; each item a dict with "id" and "label",
    "probability", "truth" (classifiers) or the model's own per-item figures."""
    import json
    from pathlib import Path

    from handlers.manifest import sha256_file

    path = Path(out) / PREDICTIONS_FILE
    body = {"model": model, "split": split, "made_by": made_by, "runtimes": runtimes}
    path.write_text(json.dumps(body, indent=1) + "\n")
    return {
        "file": PREDICTIONS_FILE,
        "sha256": sha256_file(path),
        "items": len(next(iter(runtimes.values()))["items"]),
        "runtimes": sorted(runtimes),
    }


def read_predictions(artifacts, manifest: dict) -> dict:
    """The per-item predictions the manifest vouches for; LookupError when there are none (an
    export trained before they were saved: retrain it) or the file is not the one it hashed."""
    import json
    from pathlib import Path

    from handlers.manifest import sha256_file

    block = manifest.get("predictions")
    if not block:
        raise LookupError(
            f"{manifest.get('model')}: the manifest lists no per-item held-out predictions "
            f"({PREDICTIONS_FILE}): retrain it (make train) to compare served answers item by item"
        )
    path = Path(artifacts) / block["file"]
    if not path.is_file() or sha256_file(path) != block["sha256"]:
        raise LookupError(f"{path}: missing or not the file manifest.json hashed")
    return json.loads(path.read_text())


def classified(probabilities, classes, truth) -> list[dict]:
    """Per-item predictions of a classifier: (N, C) probabilities → id, label, its probability,
    and the dataset's label."""
    import numpy as np

    p = np.asarray(probabilities, dtype=np.float64)
    top = p.argmax(-1)
    return [
        {"id": i, "label": str(classes[int(k)]), "probability": round(float(p[i, k]), 7),
         "truth": str(truth[i])}
        for i, k in enumerate(top)
    ]  # fmt: skip


def compare_classified(
    served: list[dict], predicted: dict, out: Outcome, where: str, report: str = ""
) -> None:
    """Each served answer ({"label", "probabilities": {label: p}}) against training's prediction
    for its item: the same label (all of them, or within the runtime's allowance), the
    probability of that label within PROBABILITY_ATOL, and the accuracy recomputed from the
    served answers equal to training's on these items (`report`: what that figure is)."""
    items = predicted["items"]
    allowed = int(predicted.get("allowed_label_differences", 0))
    why = predicted.get("why", "")
    if len(served) != len(items):
        out.check(False, f"{where}: {len(served)} answers for {len(items)} predicted items")
        return
    differ = [t["id"] for s, t in zip(served, items, strict=True) if s["label"] != t["label"]]
    out.check(
        len(differ) <= allowed,
        f"{where}: labels as training predicted on {len(items) - len(differ)}/{len(items)} items "
        f"(at most {allowed} may differ{': ' + why if why else ''})"
        + (f"; differing items {differ[:10]}" if differ else ""),
    )
    gaps = [
        abs(float(s["probabilities"][t["label"]]) - float(t["probability"]))
        for s, t in zip(served, items, strict=True)
        if s["label"] == t["label"]
    ]
    worst = max(gaps, default=0.0)
    out.check(
        worst <= PROBABILITY_ATOL,
        f"{where}: probabilities within {PROBABILITY_ATOL} of training's on every item "
        f"(largest difference {worst:.2e})",
    )
    right = sum(s["label"] == t["truth"] for s, t in zip(served, items, strict=True))
    want = sum(t["label"] == t["truth"] for t in items)
    out.check(
        abs(right - want) <= allowed,
        f"{where}: accuracy from the served answers {right}/{len(items)} = training's "
        f"{want}/{len(items)}{' (' + report + ')' if report else ''}"
        + (f" within {allowed}" if allowed else ""),
    )
