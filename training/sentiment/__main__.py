"""python -m training.sentiment --out DIR [--config default|tiny]
[--accelerator auto|cpu|cuda|mps] [--devices N] [--resume] [--no-track]"""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from training.common.floors import QualityError
from training.common.parity import ParityError
from training.common.tracking import TrainingRun
from training.common.trainer import add_trainer_args, trainer_options
from training.sentiment.config import CONFIGS
from training.sentiment.pipeline import fitted_to, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.sentiment", description=__doc__)
    parser.add_argument(
        "--out", required=True, help="artifact directory (manifest.json written last)"
    )
    parser.add_argument("--config", choices=sorted(CONFIGS), default="default")
    parser.add_argument("--no-track", action="store_true", help="no MLflow run, no registration")
    add_trainer_args(parser)
    args = parser.parse_args(argv)
    opts = trainer_options(args)
    cfg = fitted_to(CONFIGS[args.config], opts)  # what this machine trains: MLflow's params say so
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
        f"sentiment [{args.config}] IMDB test accuracy {m.get('test_accuracy_imdb', float('nan')):.4f}, "
        f"ECE {m['ece_before']:.4f} -> {m['ece_after']:.4f} (T={m['temperature']:.3f}), "
        f"parity max |diff| {manifest['parity']['max_abs_diff']}; wrote {args.out}/manifest.json"
        + (f"; registered {manifest['mlflow']['model_uri']}" if "mlflow" in manifest else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
