"""python -m training.sentiment --out DIR [--config default|tiny] [--encoder-layers K]
[--floors enforce|report] [--accelerator auto|cpu|cuda|mps] [--devices N] [--resume] [--no-track]"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict, replace

from training.common.entry import timed
from training.common.floors import QualityError
from training.common.parity import ParityError
from training.common.tracking import TrainingRun
from training.common.trainer import add_trainer_args, trainer_options
from training.sentiment.config import CONFIGS, ENCODER_LAYERS, SentimentConfig, at_depth
from training.sentiment.pipeline import fitted_to, run


def chosen_config(args: argparse.Namespace) -> SentimentConfig:
    """The named config with the command line's --encoder-layers and --floors applied."""
    cfg = CONFIGS[args.config]
    if args.encoder_layers is not None:
        cfg = at_depth(cfg, args.encoder_layers)
    if args.floors == "report":
        cfg = replace(cfg, enforce_floors=False)
    return cfg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.sentiment", description=__doc__)
    parser.add_argument(
        "--out", required=True, help="artifact directory (manifest.json written last)"
    )
    parser.add_argument("--config", choices=sorted(CONFIGS), default="default")
    parser.add_argument("--no-track", action="store_true", help="no MLflow run, no registration")
    parser.add_argument(
        "--encoder-layers",
        type=int,
        choices=range(1, ENCODER_LAYERS + 1),
        metavar=f"1..{ENCODER_LAYERS}",
        help="keep only the first K of MiniLM's layers (default: the config's; frozen layers are "
        "capped at K-1); measured in docs/performance.md, 'encoder depth'",
    )
    parser.add_argument(
        "--floors",
        choices=("enforce", "report"),
        default="enforce",
        help="report: record each quality floor's verdict in metrics.json and write the export "
        "even below them (needs --no-track: nothing below a floor is registered)",
    )
    add_trainer_args(parser)
    args = parser.parse_args(argv)
    if args.floors == "report" and not args.no_track:
        parser.error(
            "--floors report needs --no-track: a model below its floors is never registered"
        )
    opts = trainer_options(args)
    cfg = fitted_to(chosen_config(args), opts)  # what this machine trains: MLflow's params say so
    with timed("sentiment"):
        try:
            if args.no_track:
                manifest = run(args.out, cfg, opts)
            else:
                with TrainingRun("sentiment", asdict(cfg)) as tracking:
                    manifest = run(args.out, cfg, opts, tracking)
        except ParityError as err:
            print(f"export rejected, no manifest written: {err}", file=sys.stderr)
            return 1
        except QualityError as err:
            print(f"sentiment failed its quality gate: {err}", file=sys.stderr)
            return 1
    m = manifest["metrics"]
    print(
        f"sentiment [{cfg.name}] IMDB test accuracy {m.get('test_accuracy_imdb', float('nan')):.4f}, "
        f"ECE {m['ece_before']:.4f} -> {m['ece_after']:.4f} (T={m['temperature']:.3f}), "
        f"parity max |diff| {manifest['parity']['max_abs_diff']}; wrote {args.out}/manifest.json"
        + (f"; registered {manifest['mlflow']['model_uri']}" if "mlflow" in manifest else "")
    )
    missed = [k for k, v in m["quality_floors"].items() if v.get("met") is False]
    if missed:
        print(f"quality floors missed (--floors report, not registered): {', '.join(missed)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
