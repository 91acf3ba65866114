"""python -m training.tabular --out artifacts/tabular [--config default|tiny] [--epochs N]
[--accelerator auto|cpu|cuda|mps] [--devices N] [--resume] [--no-plots] [--no-track]"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from handlers.kits.tabular import Schema
from handlers.kits.tabular.distance import Distance
from handlers.kits.tabular.settings import TabularExport
from handlers.tabular.settings import TabularSettings
from handlers.uncertainty import classify_with_uncertainty, softmax
from training.common.calibration import (
    auroc,
    expected_calibration_error,
    fit_temperature,
    reliability_bins,
)
from training.common.entry import train_and_report
from training.common.floors import check_floors
from training.common.heldout import FP32, classified, write_predictions
from training.common.machine import describe_cpu
from training.common.manifest import write_manifest
from training.common.plots import reliability_diagram
from training.common.tracking import TrainingRun
from training.common.trainer import TrainerOptions, add_trainer_args, trainer_options
from training.tabular import ood
from training.tabular.config import CONFIGS, TrainConfig
from training.tabular.data import CLASSES, Split, load_splits
from training.tabular.model import (
    FEATURES_NAME,
    FILES,
    INPUT_NAME,
    OUTPUT_NAME,
    export_all,
    fit,
    mlp_head,
    outputs_of,
)

PLOTS = ("reliability.png", "uncertainty.png")
FAR = 10.0
"""Out-of-range probes: one feature of a test record set this many training ranges past the
largest value seen (the serving test's "far outside")."""


def far_outside(split: Split, schema: Schema) -> list[dict[str, float]]:
    """Each test record with one feature (in turn) moved FAR ranges above its training range."""
    features = schema.features
    out = []
    for i, record in enumerate(split.records):
        f = features[i % len(features)]
        out.append(record | {f.name: f.high + FAR * (f.high - f.low)})
    return out


def evaluate(
    model, splits: dict[str, Split], export: TabularExport, distance: Distance
) -> tuple[dict, dict]:
    """Accuracy and calibration per split; the served uncertainty (head.npz's fixed masks) on the
    test records against the same records far outside the training ranges; the distance's false
    flags on the test split and its flags on those far records."""
    schema, temperature = export.schema, export.temperature
    serving = TabularSettings()
    head = mlp_head(model)
    masks = head.masks(serving.mc_samples, serving.seed)
    metrics: dict = {}
    arrays: dict = {}
    for name, split in splits.items():
        logits = outputs_of(model, schema.encode(split.records))[0]
        raw, calibrated = (
            softmax(logits.astype(np.float64)),
            softmax(logits.astype(np.float64), temperature),
        )
        metrics[name] = {
            "records": len(split.labels),
            "accuracy": round(float((calibrated.argmax(-1) == split.labels).mean()), 4),
            "ece_before": round(expected_calibration_error(raw, split.labels), 4),
            "ece_after": round(expected_calibration_error(calibrated, split.labels), 4),
        }
        arrays[name] = (raw, calibrated)

    def spread(records):
        features = outputs_of(model, schema.encode(records))[1]
        return classify_with_uncertainty(features, head, masks, temperature)

    test, far = spread(splits["test"].records), spread(far_outside(splits["test"], schema))
    wrong = test.probabilities.argmax(-1) != splits["test"].labels
    block: dict = {
        "measures": f"entropy and BALD over {serving.mc_samples} fixed MC-dropout masks (seed {serving.seed}), nats"
    }
    for m in ("entropy", "mutual_information"):
        t, f = getattr(test, m), getattr(far, m)
        positive = np.r_[np.zeros(len(t), bool), np.ones(len(f), bool)]
        block[m] = {
            "test": round(float(t.mean()), 4),
            "far_outside": round(float(f.mean()), 4),
            "auroc_far_outside_vs_test": round(auroc(np.r_[t, f], positive), 4),
            "auroc_errors_vs_correct": round(auroc(t, wrong), 4)
            if 0 < wrong.sum() < len(t)
            else None,
        }
    metrics["uncertainty"] = block
    far_records = schema.encode(far_outside(splits["test"], schema))
    metrics["out_of_distribution"] = {
        "measures": "Mahalanobis distance of asinh-scaled encoded records, fitted on the train "
        f"split; threshold the validation split's {ood.QUANTILE} quantile",
        "threshold": distance.threshold,
        "false_flags_test": ood.rate(
            distance(schema.encode(splits["test"].records)) > distance.threshold
        ),
        "flagged_far_outside": ood.rate(distance(far_records) > distance.threshold),
    }
    arrays["entropy"] = (test.entropy, far.entropy)
    return metrics, arrays


def plot_uncertainty(test: np.ndarray, far: np.ndarray, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    bins = np.linspace(0, np.log(len(CLASSES)), 30)
    ax.hist(test, bins, alpha=0.7, label="held-out test records")
    ax.hist(far, bins, alpha=0.7, label=f"one feature {FAR:g} ranges past training's")
    ax.set_xlabel("entropy of the calibrated probabilities (nats)")
    ax.set_ylabel("records")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run(
    out: Path,
    cfg: TrainConfig,
    plots: bool = True,
    opts: TrainerOptions | None = None,
    tracking: TrainingRun | None = None,
    progress: bool = True,
) -> dict:
    """Learn the schema, train, calibrate, evaluate, check the floor, export (parity-gated), plot,
    write the manifest; with `tracking` (an open MLflow run) also log and register the export."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("manifest.json", *FILES):
        (out / name).unlink(missing_ok=True)
    started = time.perf_counter()
    splits = load_splits(cfg.test_fraction, cfg.val_fraction, cfg.split_seed)
    train = splits["train"]
    columns = {k: [r[k] for r in train.records] for k in train.records[0]}
    schema = Schema.learn(columns, margin=cfg.margin)
    encoded = {k: (schema.encode(s.records), s.labels) for k, s in splits.items()}
    logger = tracking.logger() if tracking else None
    model, steps = fit(cfg, encoded, len(CLASSES), opts, out, logger, progress)
    train_seconds = time.perf_counter() - started

    val_logits = outputs_of(model, encoded["val"][0])[0]
    temperature = round(fit_temperature(val_logits, splits["val"].labels), 4)
    distance = ood.fit(encoded["train"][0], encoded["val"][0])
    export = TabularExport(INPUT_NAME, OUTPUT_NAME, FEATURES_NAME, CLASSES, schema, temperature,
                           ood_threshold=distance.threshold)  # fmt: skip
    evaluation, arrays = evaluate(model, splits, export, distance)
    tested = evaluation["test"]
    floors = check_floors("tabular", {"test_accuracy": tested["accuracy"],
                                      "test_records": tested["records"]}, cfg.floors)  # fmt: skip
    parity = export_all(model, export, out, encoded["test"][0][:33])
    distance.save(out / export.distance)
    exported = Distance.load(out / export.distance, schema.width, export.ood_threshold)
    parity["distance"] = ood.parity(exported, encoded["train"][0], encoded["test"][0])
    parity["max_abs_diff"]["distance"] = parity["distance"]["max_abs_diff"]
    (out / "parity.json").write_text(json.dumps(parity, indent=2) + "\n")
    metrics = {
        "config": asdict(cfg),
        "trained_steps": steps,
        "train_seconds": round(train_seconds, 1),
        "machine": describe_cpu(),  # the CPU train_seconds was measured on
        "temperature": temperature,
        "quality_floors": floors,
        **evaluation,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if plots:
        labels = splits["test"].labels
        raw, calibrated = arrays["test"]
        ece = evaluation["test"]
        reliability_diagram(
            {"before (T=1)": (reliability_bins(raw, labels), ece["ece_before"]),
             f"after (T={temperature:g})": (reliability_bins(calibrated, labels), ece["ece_after"])},
            out / "reliability.png", "tabular: test split reliability",
        )  # fmt: skip
        inside, outside = arrays["entropy"]
        plot_uncertainty(inside, outside, out / "uncertainty.png")
    summary = {
        "trained_steps": steps,
        "train_seconds": metrics["train_seconds"],
        "machine": metrics["machine"],
        "test_accuracy": evaluation["test"]["accuracy"],
        "quality_floors": floors,
        "test_records": evaluation["test"]["records"],
        "val_accuracy": evaluation["val"]["accuracy"],
        "ece_test": {k: evaluation["test"][k] for k in ("ece_before", "ece_after")},
        "temperature": temperature,
        "uncertainty": evaluation["uncertainty"],
        "out_of_distribution": evaluation["out_of_distribution"],
    }
    predictions = write_predictions(out, "tabular", "test (every record)", "the eager model, calibrated",
                                    {FP32: {"items": classified(arrays["test"][1], CLASSES, [CLASSES[i] for i in splits["test"].labels])}})  # fmt: skip
    manifest = write_manifest(
        out, "tabular", list(FILES), export.to_block(), summary, parity["max_abs_diff"],
        predictions=predictions,
    )  # fmt: skip
    if tracking is not None:
        tracking.finish(out, manifest, metrics, PLOTS if plots else ())
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--config", choices=sorted(CONFIGS), default="default")
    p.add_argument("--epochs", type=int, help="override the config's epochs")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-track", action="store_true", help="no MLflow run, no registration")
    add_trainer_args(p)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = CONFIGS[args.config]
    if args.epochs:
        cfg = dataclasses.replace(cfg, epochs=args.epochs)
    return train_and_report(
        "tabular", run, args.out, cfg, not args.no_plots, trainer_options(args),
        track=not args.no_track, params={"threads": args.threads},
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
