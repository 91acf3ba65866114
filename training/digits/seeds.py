"""The recipe over several torch seeds: `python -m training.digits.seeds --out DIR --seeds 0 1 2 3`
trains each seed alone (no floors, no retries, no MLflow run) and writes DIR/seeds.json: each seed's
selection and test accuracy, their mean and spread, the binomial interval of the mean's test
accuracy, and the CPU. Copied to training/digits/seeds.json, it is the `seed_spread` every
training's metrics.json carries beside its one seed's figures, and docs/digits.md's table."""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

import torch

from training.common.machine import describe_cpu
from training.digits.__main__ import run, wilson
from training.digits.config import CONFIGS


def measure(out: Path, seeds: list[int], config: str = "default") -> dict:
    rows = []
    for seed in seeds:
        cfg = dataclasses.replace(
            CONFIGS[config], torch_seed=seed, retry_seeds=(), min_selection_accuracy=None,
            min_test_accuracy=None,
        )  # fmt: skip
        run(out / f"seed-{seed}", cfg, plots=False, progress=False)
        metrics = json.loads((out / f"seed-{seed}" / "metrics.json").read_text())
        rows.append({
            "seed": seed,
            "selection_accuracy": metrics["selection"]["accuracy"],
            "test_accuracy": metrics["test"]["accuracy"],
            "train_seconds": metrics["train_seconds"],
        })  # fmt: skip
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    summary: dict = {"config": config, "seeds": rows, "machine": describe_cpu()}
    for figure in ("selection_accuracy", "test_accuracy"):
        values = [r[figure] for r in rows]
        summary[figure] = {
            "mean": round(statistics.fmean(values), 4),
            "std": round(statistics.stdev(values), 4) if len(values) > 1 else 0.0,
            "min": min(values),
            "max": max(values),
        }
    n = 297
    summary["test_accuracy"]["interval_95_of_one_seed_at_the_mean"] = wilson(
        round(summary["test_accuracy"]["mean"] * n), n
    )
    (out / "seeds.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    p.add_argument("--config", default="default", choices=sorted(CONFIGS))
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(json.dumps(measure(args.out, args.seeds, args.config), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
