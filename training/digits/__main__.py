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

from handlers.digits.settings import DigitsSettings
from handlers.uncertainty import classify_with_uncertainty, softmax
from training.common.calibration import (
    auroc,
    expected_calibration_error,
    fit_temperature,
    reliability_bins,
)
from training.common.entry import train_and_report
from training.common.floors import QualityError, check_floors
from training.common.floors import wilson as wilson_interval
from training.common.heldout import FP32, classified, write_predictions
from training.common.machine import describe_cpu
from training.common.manifest import write_manifest
from training.common.plots import reliability_diagram
from training.common.tracking import TrainingRun
from training.common.trainer import TrainerOptions, add_trainer_args, trainer_options
from training.digits.config import CONFIGS, TrainConfig
from training.digits.data import load_splits
from training.digits.export import FILES, export_all
from training.digits.model import ARCHS, mlp_head
from training.digits.outliers import TRAIN_KINDS
from training.digits.plots import confusion, plot_confusion, plot_samples
from training.digits.probes import HELD_OUT_KINDS, non_digits
from training.digits.train import export_block, logits_of, outputs_of, redrawn_splits, train

PLOTS = ("test_confusion.png", "test_samples.png", "reliability.png")
SPLITS = {
    "train": "load_digits' first 1,350 images, their redrawn copies, glyphs and typeset digits "
    "(torch seed): fitted on",
    "selection": "the next 150 images (val), their redrawn copies, glyphs and typeset digits "
    "(selection_seed): early stopping, the temperature and the seed retries read it, nothing else",
    "test": "the last 297 images: read once, after every choice; the figures reported",
}
SEEDS_FILE = Path(__file__).with_name("seeds.json")
"""The recipe over several torch seeds, measured by `python -m training.digits.seeds` (docs/digits.md)."""


def seed_spread() -> dict | None:
    """The recipe's mean and spread over seeds (seeds.json), beside the kept seed's figures."""
    return json.loads(SEEDS_FILE.read_text()) if SEEDS_FILE.is_file() else None


def _auroc(id_scores: np.ndarray, ood_scores: np.ndarray) -> float:
    scores = np.concatenate([id_scores, ood_scores])
    is_ood = np.r_[np.zeros(len(id_scores), bool), np.ones(len(ood_scores), bool)]
    return round(auroc(scores, is_ood), 4)


def evaluate(model, splits, export, temperature: float) -> tuple[dict, dict]:
    """Accuracy and calibration on each split, and the MC-dropout uncertainty (the handler's: the
    head of head.npz over the features with its default fixed masks) on held-out digits vs
    non-digit kinds; also the test split's arrays for the plots."""
    metrics: dict = {}
    arrays: dict = {}
    serving = DigitsSettings()
    head = mlp_head(model)
    masks = head.masks(serving.mc_samples, serving.seed)

    def uncertainty(greys: np.ndarray):
        return classify_with_uncertainty(
            outputs_of(model, greys, export)[1], head, masks, temperature
        )

    for name, split in splits.items():
        logits = logits_of(model, split.greys, export).astype(np.float64)
        raw, calibrated = softmax(logits), softmax(logits, temperature)
        predicted = calibrated.argmax(-1)
        metrics[name] = {
            "images": int(len(split.labels)),
            "accuracy": round(float((predicted == split.labels).mean()), 4),
            "ece_before": round(expected_calibration_error(raw, split.labels), 4),
            "ece_after": round(expected_calibration_error(calibrated, split.labels), 4),
        }
        arrays[name] = (calibrated, predicted)
    test = uncertainty(splits["test"].greys)
    wrong = arrays["test"][1] != splits["test"].labels
    ood = {k: uncertainty(g) for k, g in non_digits().items()}
    block: dict = {
        "measures": "entropy of the calibrated probabilities and BALD mutual information over "
        f"{serving.mc_samples} fixed MC-dropout masks of the head (seed {serving.seed}), nats",
        "outlier_exposure": {
            "weight": None,  # filled in by run(), which knows the config
            "trained_kinds": list(TRAIN_KINDS),
            "held_out_kinds": [k for k in ood if k in HELD_OUT_KINDS],
        },
        "test_digits": {"images": len(wrong)},
        "non_digits": {},
    }
    for measure in ("entropy", "mutual_information"):
        t = getattr(test, measure)
        block["test_digits"][measure] = round(float(t.mean()), 4)
        for k, u in ood.items():
            row = block["non_digits"].setdefault(k, {"images": len(u.entropy)})
            row[measure] = round(float(getattr(u, measure).mean()), 4)
            row[f"auroc_{measure}"] = _auroc(t, getattr(u, measure))
        all_ood = np.concatenate([getattr(u, measure) for u in ood.values()])
        block[f"auroc_non_digits_vs_test_{measure}"] = _auroc(t, all_ood)
        block[f"auroc_errors_vs_correct_{measure}"] = (
            round(auroc(t, wrong), 4) if 0 < wrong.sum() < len(wrong) else None
        )
    metrics["uncertainty"] = block
    return metrics, arrays


def wilson(right: int, n: int) -> list[float]:
    """The binomial 95 % (Wilson score) interval of an accuracy of `right` of `n`, rounded."""
    return [round(bound, 4) for bound in wilson_interval(right, n)]


def selection_figures(model, images: tuple, export) -> dict:
    """Accuracy on the selection split (validation: its digits, their redrawn copies, glyphs and
    typeset digits), with its binomial interval: what the seed retries read."""
    predicted = logits_of(model, images[0], export).argmax(-1)
    right = int((predicted == images[1]).sum())
    return {
        "images": len(images[1]),
        "accuracy": round(right / len(images[1]), 4),
        "interval_95": wilson(right, len(images[1])),
    }


def candidate(
    cfg: TrainConfig,
    splits: dict,
    opts: TrainerOptions | None,
    root: Path,
    tracking: TrainingRun | None,
    progress: bool,
) -> tuple:
    """One seed's model (cfg.torch_seed): trained, calibrated on the selection split, its
    selection floor checked there (QualityError: the next seed trains). The test split is not
    read here."""
    export = export_block(cfg, splits["train"])
    logger = tracking.logger() if tracking else None
    model, trained_steps = train(cfg, splits, export, opts, root, logger, progress)
    # Fitted on what validation is made of: its digits and their redrawn copies.
    val_images = redrawn_splits(cfg, splits)["val"]
    temperature = round(fit_temperature(logits_of(model, val_images[0], export), val_images[1]), 4)
    export = dataclasses.replace(export, temperature=temperature)
    selection = selection_figures(model, val_images, export)
    check_floors("digits", {"selection_accuracy": selection["accuracy"]}, cfg.selection_floors,
                 f"seed {cfg.torch_seed}")  # fmt: skip
    return model, export, selection, trained_steps


def run(
    out: Path,
    cfg: TrainConfig,
    plots: bool = True,
    opts: TrainerOptions | None = None,
    tracking: TrainingRun | None = None,
    progress: bool = True,
) -> dict:
    """Train, export (parity-gated), calibrate, evaluate, plot, write the manifest; with `tracking`
    (an open MLflow run) also log metrics and reports and register the export. Seeds are chosen
    on the selection split; the test split is read once, after that choice."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    # No manifest until the new export passed parity, and no export of a model below the floors.
    for name in ("manifest.json", *FILES):
        (out / name).unlink(missing_ok=True)
    started = time.perf_counter()
    splits = load_splits(cfg.train_images, cfg.val_images)
    seeds = [cfg.torch_seed, *(s for s in cfg.retry_seeds if s != cfg.torch_seed)]
    tried: list[dict] = []
    for seed in seeds:
        # The first seed checkpoints under out/ (as --resume expects); a retry under its own folder.
        # MLflow's step curves are the first seed's; every seed's figure is in seeds_tried.
        root = out if seed == seeds[0] else out / "retries" / f"seed-{seed}"
        try:
            model, export, selection, trained_steps = candidate(
                dataclasses.replace(cfg, torch_seed=seed), splits, opts, root,
                tracking if not tried else None, progress,
            )  # fmt: skip
        except QualityError as e:
            tried.append({"seed": seed, **e.figures, "floors_met": False})
            if len(tried) == len(seeds):
                raise QualityError(f"{e} (seeds tried: {tried})", e.figures) from e
            print(f"digits: seed {seed} missed the selection floor ({e.figures}); "
                  f"training seed {seeds[len(tried)]}", file=sys.stderr, flush=True)  # fmt: skip
            continue
        tried.append({"seed": seed, "selection_accuracy": selection["accuracy"],
                      "floors_met": True})  # fmt: skip
        break
    # Every choice is made: the test split is read now, once.
    temperature = export.temperature
    evaluation, arrays = evaluate(model, splits, export, temperature)
    tested = evaluation["test"]
    right = int(round(tested["accuracy"] * tested["images"]))
    tested["interval_95"] = wilson(right, tested["images"])
    evaluation["selection"] = selection
    floors = check_floors("digits", {"test_accuracy": tested["accuracy"],
                                     "test_images": tested["images"]}, cfg.floors,
                          f"seed {tried[-1]['seed']}, chosen on the selection split")  # fmt: skip
    train_seconds = time.perf_counter() - started
    parity = export_all(model, export, out, splits["test"].greys[:33])
    (out / "parity.json").write_text(json.dumps(parity, indent=2) + "\n")
    evaluation["uncertainty"]["outlier_exposure"]["weight"] = cfg.outlier_weight
    metrics = {
        "config": asdict(cfg),  # as asked: its torch_seed is the first seed tried
        "splits": SPLITS,
        "input_shape": list(cfg.input_shape),
        "trained_steps": trained_steps,
        "train_seconds": round(train_seconds, 1),
        "seeds_tried": tried,  # in order, selection figures; the last is the export's
        "seed_spread": seed_spread(),
        "machine": describe_cpu(),  # the CPU train_seconds was measured on
        "temperature": temperature,
        "quality_floors": floors,
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
        raw = softmax(logits_of(model, test.greys, export).astype(np.float64))
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
        "test_accuracy_interval_95": evaluation["test"]["interval_95"],
        "selection_accuracy": selection["accuracy"],
        "quality_floors": floors,
        "test_images": evaluation["test"]["images"],
        "val_accuracy": evaluation["val"]["accuracy"],
        "ece_test": {k: evaluation["test"][k] for k in ("ece_before", "ece_after")},
        "temperature": temperature,
        "uncertainty": {
            "test_digits": evaluation["uncertainty"]["test_digits"],
            "non_digits": evaluation["uncertainty"]["non_digits"],
            "auroc_non_digits_entropy": evaluation["uncertainty"][
                "auroc_non_digits_vs_test_entropy"
            ],
            "auroc_non_digits_mutual_information": evaluation["uncertainty"][
                "auroc_non_digits_vs_test_mutual_information"
            ],
            "held_out_kinds": evaluation["uncertainty"]["outlier_exposure"]["held_out_kinds"],
        },
    }
    test = splits["test"]  # what check-served asks: training's per-item predictions for it
    items = classified(arrays["test"][0], export.classes, [export.classes[i] for i in test.labels])
    predictions = write_predictions(
        out, "digits", "test", "the eager model, calibrated", {FP32: {"items": items}}
    )
    manifest = write_manifest(
        out, "digits", list(FILES), export.to_block(), summary, parity["max_abs_diff"],
        predictions=predictions,
    )  # fmt: skip
    if tracking is not None:
        tracking.finish(out, manifest, metrics, PLOTS if plots else ())
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--config", choices=sorted(CONFIGS), default="default")
    p.add_argument("--arch", choices=ARCHS, help="default: the config's (cnn)")
    p.add_argument("--epochs", type=int, help="override the config's epochs")
    p.add_argument(
        "--outlier-weight", type=float, help="override outlier exposure's weight (0: off)"
    )
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
    if args.outlier_weight is not None:
        cfg = dataclasses.replace(cfg, outlier_weight=args.outlier_weight)
    return train_and_report(
        "digits", run, args.out, cfg, not args.no_plots, trainer_options(args),
        track=not args.no_track, params={"threads": args.threads},
    )  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
