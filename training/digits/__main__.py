"""python -m training.digits --out artifacts/digits [--config default|tiny] [--arch cnn|resnet]
[--accelerator auto|cpu|cuda|mps] [--devices N] [--resume]"""

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

from handlers.digits.predict import softmax
from training.common.calibration import (
    auroc,
    expected_calibration_error,
    fit_temperature,
    reliability_bins,
)
from training.common.entry import train_and_report
from training.common.machine import describe_cpu
from training.common.manifest import write_manifest
from training.common.plots import reliability_diagram
from training.common.tracking import TrainingRun
from training.common.trainer import TrainerOptions, add_trainer_args, trainer_options
from training.digits.config import CONFIGS, TrainConfig
from training.digits.data import load_splits
from training.digits.export import FILES, export_all
from training.digits.model import ARCHS
from training.digits.plots import confusion, plot_confusion, plot_samples
from training.digits.probes import non_digits
from training.digits.train import export_block, logits_of, train

PLOTS = ("test_confusion.png", "test_samples.png", "reliability.png")


def entropy(probs: np.ndarray) -> np.ndarray:
    return -(probs * np.log(np.clip(probs, 1e-12, None))).sum(axis=-1)


def evaluate(model, splits, export, temperature: float) -> tuple[dict, dict]:
    """Accuracy and calibration on each split, and the entropy on digits vs non-digits; also the
    test split's arrays for the plots."""
    metrics: dict = {}
    arrays: dict = {}
    for name, split in splits.items():
        logits = logits_of(model, split.greys, export)
        raw, calibrated = softmax(logits), softmax(logits, temperature)
        predicted = calibrated.argmax(-1)
        metrics[name] = {
            "images": int(len(split.labels)),
            "accuracy": round(float((predicted == split.labels).mean()), 4),
            "ece_before": round(expected_calibration_error(raw, split.labels), 4),
            "ece_after": round(expected_calibration_error(calibrated, split.labels), 4),
        }
        arrays[name] = (calibrated, predicted)
    test_probs, test_pred = arrays["test"]
    test_h = entropy(test_probs)
    wrong = test_pred != splits["test"].labels
    ood = {
        k: entropy(softmax(logits_of(model, g, export), temperature))
        for k, g in non_digits().items()
    }
    all_ood = np.concatenate(list(ood.values()))
    metrics["uncertainty"] = {
        "measure": "entropy of the calibrated probabilities (nats)",
        "mean_test_digits": round(float(test_h.mean()), 4),
        "mean_non_digits": {k: round(float(v.mean()), 4) for k, v in ood.items()},
        "auroc_non_digits_vs_test": round(
            auroc(np.concatenate([test_h, all_ood]),
                  np.concatenate([np.zeros(len(test_h)), np.ones(len(all_ood))]).astype(bool)), 4
        ),  # fmt: skip
        "auroc_errors_vs_correct": round(auroc(test_h, wrong), 4) if 0 < wrong.sum() < len(wrong) else None,
    }  # fmt: skip
    return metrics, arrays


def run(
    out: Path,
    cfg: TrainConfig,
    plots: bool = True,
    opts: TrainerOptions | None = None,
    tracking: TrainingRun | None = None,
    progress: bool = True,
) -> dict:
    """Train, export (parity-gated), calibrate, evaluate, plot, write the manifest; with `tracking`
    (an open MLflow run) also log metrics and reports and register the export."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(missing_ok=True)  # none until the new export passed parity
    started = time.perf_counter()
    splits = load_splits(cfg.train_images, cfg.val_images)
    export = export_block(cfg, splits["train"])
    logger = tracking.logger() if tracking else None
    model, trained_steps = train(cfg, splits, export, opts, out, logger, progress)
    train_seconds = time.perf_counter() - started
    parity = export_all(model, export, out, splits["test"].greys[:33])
    (out / "parity.json").write_text(json.dumps(parity, indent=2) + "\n")

    val = splits["val"]
    temperature = round(fit_temperature(logits_of(model, val.greys, export), val.labels), 4)
    export = dataclasses.replace(export, temperature=temperature)
    evaluation, arrays = evaluate(model, splits, export, temperature)
    metrics = {
        "config": asdict(cfg),
        "input_shape": list(cfg.input_shape),
        "trained_steps": trained_steps,
        "train_seconds": round(train_seconds, 1),
        "machine": describe_cpu(),  # the CPU train_seconds was measured on
        "temperature": temperature,
        **evaluation,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if plots:
        test = splits["test"]
        probs, predicted = arrays["test"]
        acc = evaluation["test"]["accuracy"]
        plot_confusion(confusion(test.labels, predicted), out / "test_confusion.png",
                       f"digits {cfg.arch}: last 297 images, accuracy {acc:.4f}")  # fmt: skip
        plot_samples(test.greys, test.labels, predicted, probs.max(-1), out / "test_samples.png")
        raw = softmax(logits_of(model, test.greys, export))
        panels = {
            "before (T=1)": (reliability_bins(raw, test.labels), evaluation["test"]["ece_before"]),
            f"after (T={temperature:g})": (reliability_bins(probs, test.labels), evaluation["test"]["ece_after"]),
        }  # fmt: skip
        reliability_diagram(panels, out / "reliability.png", "digits: test split reliability")
    summary = {
        "arch": cfg.arch,
        "input_shape": list(cfg.input_shape),
        "trained_steps": trained_steps,
        "train_seconds": metrics["train_seconds"],
        "machine": metrics["machine"],
        "test_accuracy": evaluation["test"]["accuracy"],
        "test_images": evaluation["test"]["images"],
        "val_accuracy": evaluation["val"]["accuracy"],
        "ece_test": {k: evaluation["test"][k] for k in ("ece_before", "ece_after")},
        "temperature": temperature,
        "entropy": {
            "test_digits": evaluation["uncertainty"]["mean_test_digits"],
            "non_digits": evaluation["uncertainty"]["mean_non_digits"],
            "auroc_non_digits": evaluation["uncertainty"]["auroc_non_digits_vs_test"],
        },
    }
    manifest = write_manifest(
        out, "digits", list(FILES), export.to_block(), summary, parity["max_abs_diff"]
    )
    if tracking is not None:
        tracking.finish(out, manifest, metrics, PLOTS if plots else ())
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--config", choices=sorted(CONFIGS), default="default")
    p.add_argument("--arch", choices=ARCHS, help="default: the config's (cnn)")
    p.add_argument("--epochs", type=int, help="override the config's epochs")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--no-track", action="store_true", help="no MLflow run, no registration")
    add_trainer_args(p)
    # One thread by default, as frequency: on a shared 2-core machine a second intra-op thread
    # only spins against the other jobs for a network this small.
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    cfg = CONFIGS[args.config]
    if args.arch:
        cfg = dataclasses.replace(cfg, arch=args.arch)
    if args.epochs:
        cfg = dataclasses.replace(cfg, epochs=args.epochs)
    return train_and_report(
        "digits", run, args.out, cfg, not args.no_plots, trainer_options(args),
        track=not args.no_track, params={"threads": args.threads},
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
