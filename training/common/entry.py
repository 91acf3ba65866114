"""The end of every model's `python -m training.<model>`: run it (tracked in MLflow unless told
not to), turn a failed parity or quality gate into exit status 1, print the metrics."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from training.common.floors import QualityError
from training.common.parity import ParityError
from training.common.tracking import TrainingRun

__all__ = ["QualityError", "train_and_report"]


def train_and_report(
    model: str,
    run: Callable[..., dict],
    out: Path,
    cfg: Any,
    plots: bool,
    opts: Any,
    track: bool,
    params: dict | None = None,
) -> int:
    """`run(out, cfg, plots, opts[, tracking])` → manifest; `params` join the config in MLflow."""
    try:
        if not track:
            manifest = run(out, cfg, plots, opts)
        else:
            with TrainingRun(model, asdict(cfg) | (params or {})) as tracking:
                manifest = run(out, cfg, plots, opts, tracking)
    except ParityError as e:
        print(f"{model} export failed the parity gate: {e}", file=sys.stderr)
        return 1
    except QualityError as e:
        print(f"{model} failed its quality gate: {e}", file=sys.stderr)
        return 1
    print(json.dumps(manifest["metrics"], indent=2))
    return 0
