"""Are the tabular explanations faithful? Feature-deletion curves over the held-out test records.

For each of the test split's records: explain the predicted label (the served explainer: each
feature's attribution to the label's calibrated log-odds against its training baseline), set its
k most attributed features to their training baseline (the explainer's own "absent") and measure
the drop of the label's calibrated probability; the same with k random features (3 draws per
record). k = 3 features and 10 % of them. The gate (training/common/deletion.unfaithful): the
mean top-k less random-k drop, with its paired bootstrap 95 % interval, above zero.

    python -m training.tabular.faithfulness --artifacts artifacts/tabular --out reports/explanations
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from training.common.deletion import plot, report, summary

KS: tuple[int | str, ...] = (1, 3, "10%", 5)
GATED: tuple[int | str, ...] = (3, "10%")
"""The k the faithfulness gate holds."""
DRAWS = 3


def features_for(k: int | str, n: int) -> int:
    return max(1, round(n * float(k.rstrip("%")) / 100)) if isinstance(k, str) else min(k, n)


def evaluate(
    model,
    records: list[dict[str, Any]],
    draws: int = DRAWS,
    seed: int = 0,
    ks: Sequence[int | str] = KS,
    attributions: Callable[[dict[str, Any]], tuple[str, float, dict[str, float]]] | None = None,
) -> dict:
    """`model`: handlers/tabular/model.TabularModel. `attributions`: record -> (label, its
    probability, feature -> attribution); default the served explainer's."""
    schema = model.schema
    baseline = {f.name: f.baseline() for f in schema.features}
    names = [f.name for f in schema.features]
    rng = np.random.default_rng(seed)
    top: dict[str, list[float]] = {str(k): [] for k in ks}
    rand: dict[str, list[float]] = {str(k): [] for k in ks}
    seconds, passes = [], []

    def served(row: dict[str, Any]) -> tuple[str, float, dict[str, float]]:
        ex = model._explain(row)
        passes.append(ex.evaluations)
        return ex.target, ex.probability, ex.attributions

    explain = attributions or served
    for row in records:
        t0 = time.perf_counter()
        label, probability, attr = explain(row)
        seconds.append(time.perf_counter() - t0)
        order = sorted(names, key=lambda n: -attr[n])
        edited, owners = [], []
        for key in ks:
            k = features_for(key, len(names))
            picks = [order[:k]] + [list(rng.choice(names, k, replace=False)) for _ in range(draws)]
            for i, pick in enumerate(picks):
                edited.append(row | {n: baseline[n] for n in pick})
                owners.append(("top" if i == 0 else "random", str(key)))
        for (kind, key_), answer in zip(owners, model.classify(edited), strict=True):
            (top if kind == "top" else rand)[key_].append(
                probability - answer["probabilities"][label]
            )
    method = "random attributions" if attributions else model.settings.explain_method
    return {
        "label": method,
        "method": method,
        "random_label": "random features",
        "records": len(records),
        "random_draws": draws,
        "deletion": summary([str(k) for k in ks], top, rand, seed),
        "seconds_per_explanation": float(np.mean(seconds)),
        "evaluations_per_explanation": float(np.mean(passes)) if passes else 0.0,
    }


def random_attributions(model, seed: int = 0):
    """An explainer that ranks the features at random (what the gate must refuse)."""
    rng = np.random.default_rng(seed)
    names = [f.name for f in model.schema.features]

    def explain(row: dict[str, Any]) -> tuple[str, float, dict[str, float]]:
        [answer] = model.classify([row])
        values = rng.standard_normal(len(names))
        return (
            answer["label"],
            answer["probabilities"][answer["label"]],
            dict(zip(names, values, strict=True)),
        )

    return explain


def test_records(artifacts: Path) -> list[dict[str, Any]]:
    """The test split the model's metrics.json names (never trained, calibrated or chosen on)."""
    import json

    from training.tabular.config import TrainConfig
    from training.tabular.data import load_splits

    path = artifacts / "metrics.json"
    cfg = json.loads(path.read_text()).get("config", {}) if path.is_file() else {}
    d = TrainConfig()
    return load_splits(cfg.get("test_fraction", d.test_fraction),
                       cfg.get("val_fraction", d.val_fraction), cfg.get("split_seed", d.split_seed))["test"].records  # fmt: skip


def load(artifacts: Path):
    import yaml

    from handlers.registry import get
    from handlers.tabular.model import TabularModel

    config = yaml.safe_load(get("tabular").model_config.read_text()).get("handler") or {}
    return TabularModel.load(artifacts, config)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--artifacts", type=Path, default=Path("artifacts/tabular"))
    ap.add_argument("--out", type=Path, default=Path("reports/explanations"))
    ap.add_argument("--draws", type=int, default=DRAWS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from training.common.machine import cpu_summary, describe_cpu

    model = load(args.artifacts)
    records = test_records(args.artifacts)
    results = [
        evaluate(model, records, args.draws, args.seed),
        evaluate(model, records, args.draws, args.seed, attributions=random_attributions(model)),
    ]
    meta = {"model": dict(model.model_info), "cpu": cpu_summary(describe_cpu())}
    report(args.out, "tabular", results, KS, meta)
    plot(results, KS, args.out / "tabular_deletion.png", f"Tabular feature deletion, {len(records)} held-out records",
         "features set to their training baseline (k, or a share)", "mean drop of the predicted label's probability")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
