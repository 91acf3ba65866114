"""The end of every model's `python -m training.<model>`: run it (tracked in MLflow unless told
not to), turn a failed parity or quality gate into exit status 1, print the metrics."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from training.common.floors import QualityError
from training.common.parity import ParityError
from training.common.tracking import TrainingRun

__all__ = ["QualityError", "timed", "train_and_report"]


@contextlib.contextmanager
def timed(model: str) -> Iterator[None]:
    """On the way out, pass or fail, one line on stderr: how long this model's training run took
    and on which CPU (`make serve` and CI print it per model: where the first run's time goes)."""
    from training.common.machine import cpu_summary, describe_cpu

    started = time.monotonic()
    try:
        yield
    finally:
        took = round(time.monotonic() - started)
        print(f"training: {model} took {took // 60} min {took % 60} s on "
              f"{cpu_summary(describe_cpu())}", file=sys.stderr, flush=True)  # fmt: skip


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
    with timed(model):
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
