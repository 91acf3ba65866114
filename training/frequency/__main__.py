"""python -m training.frequency --out artifacts/frequency [--config default|tiny]
[--arch lstm|lstm-attention] [--candidates 0,1] [--jobs N] [--accelerator auto|cpu|cuda|mps]
[--devices N] [--resume]"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from handlers.frequency.settings import BandScale, FrequencyExport
from handlers.kits.signal.settings import ExportGraph
from training.common.entry import train_and_report
from training.common.floors import check_floors
from training.common.heldout import FP32, write_predictions
from training.common.machine import describe_cpu
from training.common.manifest import write_manifest
from training.common.tracking import TrainingRun
from training.common.trainer import TrainerOptions, add_trainer_args, trainer_options
from training.frequency.candidates import (
    history,
    load_model,
    select,
    train_candidates,
    untrained,
)
from training.frequency.config import CONFIGS, TrainConfig
from training.frequency.export import STEP_FILES
from training.frequency.model import (
    ARCHS,
    SEQUENCE_INPUTS,
    SEQUENCE_OUTPUTS,
    STEP_INPUTS,
    STEP_OUTPUTS,
)
from training.frequency.ood import ood_threshold, stationarity_thresholds
from training.frequency.plots import plot_components
from training.frequency.quality import MODES, band_figures, calibrate, figures, quality

HEAD_FILE = "head.npz"


def handler_settings(cfg: TrainConfig, band_scale: BandScale | None = None) -> FrequencyExport:
    """What the handler must know about the export (the manifest's handler block, read at load)."""
    nonstationarity, offset = stationarity_thresholds(cfg)
    return FrequencyExport(
        window=cfg.window,
        block=cfg.block,
        sample_rate=cfg.signal.sample_rate,
        frequencies=tuple(cfg.signal.frequencies),
        hidden=cfg.hidden,
        layers=cfg.layers,
        sequence=ExportGraph(tuple(SEQUENCE_INPUTS), tuple(SEQUENCE_OUTPUTS)),
        step=ExportGraph(tuple(STEP_INPUTS), tuple(STEP_OUTPUTS), STEP_FILES),
        head=HEAD_FILE,
        ood_threshold=ood_threshold(cfg),
        nonstationarity_threshold=nonstationarity,
        offset_threshold=offset,
        band_scale=band_scale,
    )


PLOTS = ("test_components.png",)


def run(
    out: Path,
    cfg: TrainConfig,
    plots: bool = True,
    opts: TrainerOptions | None = None,
    tracking: TrainingRun | None = None,
    progress: bool = True,
    jobs: int | None = None,
    threads: int | None = None,
) -> dict:
    """Train the config's candidate seeds (`jobs` at once, `threads` each, until one is under the
    floor; training/frequency/candidates.py), keep the best on validation, export it (parity-gated), evaluate, plot, write
    the manifest; with `tracking` (an open MLflow run) also log metrics and reports and register
    the export."""
    from training.frequency.export import export_all

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "manifest.json").unlink(
        missing_ok=True
    )  # no manifest until the new export passed parity
    started = time.perf_counter()
    candidates = train_candidates(cfg, opts or TrainerOptions(), out, progress, jobs, threads)
    if tracking is not None:
        for c in candidates:
            tracking.log_history(history(c), prefix=f"candidates.seed-{c.seed}.")
    kept = select(candidates, cfg)  # QualityError: nothing below runs, no manifest
    if tracking is not None:
        tracking.log_history(history(kept))
    cfg = dataclasses.replace(cfg, torch_seed=kept.seed)  # what metrics.json records
    model, trained_steps = load_model(kept, cfg), kept.steps
    train_seconds = time.perf_counter() - started
    # The floors on held-out served-family signals, both modes: a miss raises QualityError here,
    # before anything is exported (no manifest, nothing registered).
    # The band's factors are fitted on signals of their own seed, then held on the test signals.
    band_scale = calibrate(model, cfg)
    per_item: list[dict] = []
    test_quality = quality(model, cfg, band_scale=band_scale, items=per_item)
    floors = check_floors(
        "frequency", figures(test_quality) | band_figures(test_quality), cfg.floors,
        "held-out served-family signals (training/frequency/quality.py); train other seeds: "
        "python -m training.frequency --candidates 2,3 --out ...",
    )  # fmt: skip
    parity = export_all(model, out)
    (out / "parity.json").write_text(json.dumps(parity, indent=2) + "\n")
    model.head().save(out / HEAD_FILE)

    metrics = {
        "config": asdict(cfg),
        "trained_steps": trained_steps,
        "train_seconds": round(train_seconds, 1),
        "machine": describe_cpu(),  # the CPU train_seconds was measured on
        "seed": kept.seed,
        "candidates": {f"seed-{c.seed}": c.summary() for c in candidates},
        "candidates_not_trained": untrained(candidates, cfg),  # an earlier seed was under the floor
        "band_scale": band_scale.to_block(),
        "quality": test_quality,
        "floors": floors,
    }
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if plots:
        plot_components(model, cfg, out / "test_components.png")
    summary = {
        "arch": cfg.arch,
        "seed": kept.seed,
        "validation_score": {f"seed-{c.seed}": c.score for c in candidates},
        "candidates_not_trained": metrics["candidates_not_trained"],
        "trained_steps": trained_steps,
        "train_seconds": metrics["train_seconds"],
        "machine": metrics["machine"],
        "heldout_family": figures(test_quality),
        "band_scale": band_scale.to_block(),
        "band_coverage": {m: test_quality[m]["band_coverage"] for m in MODES},
    }
    serve = ["model.pt", "model.onnx", "step.pt", "step.onnx", HEAD_FILE]
    parity_summary = {k: v["max_abs_diff"] for k, v in parity.items()}
    manifest = write_manifest(
        out,
        "frequency",
        serve,
        handler_settings(cfg, band_scale).to_block(),
        summary,
        parity_summary,
        predictions=write_predictions(
            out, "frequency", f"test (seed {cfg.test_seed}, {len(per_item)} served-family signals)",
            "the eager model, windows mode, as a one-shot request answers", {FP32: {"items": per_item}},
        ),
    )  # fmt: skip
    if tracking is not None:
        tracking.finish(out, manifest, metrics, PLOTS if plots else ())
    return manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--config", choices=sorted(CONFIGS), default="default")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--arch", choices=ARCHS, help="default: the config's (lstm)")
    p.add_argument("--steps", type=int, help="override the config's optimizer steps")
    p.add_argument("--no-track", action="store_true", help="no MLflow run, no registration")
    p.add_argument("--candidates", type=_seeds,
                   help="comma-separated seeds to train and choose from (default: the config's)")  # fmt: skip
    p.add_argument("--jobs", type=int,
                   help="candidates trained at once (default: as many as the cores hold at --threads)")  # fmt: skip
    add_trainer_args(p)
    # On a machine other jobs share, prefer --threads 1: a 2-thread LSTM step spun for 10.7 s of
    # CPU against 0.18 s with one thread once a neighbour took a core.
    p.add_argument("--threads", type=int, help="threads per candidate (default: the config's, 2)")
    args = p.parse_args(argv)
    cfg = CONFIGS[args.config]
    if args.arch:
        cfg = dataclasses.replace(cfg, arch=args.arch)
    if args.steps:
        cfg = dataclasses.replace(cfg, steps=args.steps)
    if args.candidates:
        cfg = dataclasses.replace(cfg, candidates=args.candidates)
    return train_and_report(
        "frequency", functools.partial(run, jobs=args.jobs, threads=args.threads), args.out, cfg,
        not args.no_plots, trainer_options(args), track=not args.no_track,
        params={"threads": args.threads or cfg.threads, "jobs": args.jobs},
    )  # fmt: skip


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(s) for s in text.split(",") if s.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of seeds: {text!r}") from None
    if not seeds:
        raise argparse.ArgumentTypeError("at least one seed")
    return seeds


if __name__ == "__main__":
    sys.exit(main())
