"""The held-out question `make check-served` asks the served frequency model (training/common/heldout.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from training.common.heldout import HeldOut, Outcome

MSE_RATIO, MSE_SLACK = 1.05, 1e-3
"""Each served component's MSE may be the report's (the same signal and stitching) x MSE_RATIO
+ MSE_SLACK: the export answers as the eager model within its parity tolerance."""


def served_check(manifest: dict, artifacts: Path) -> HeldOut:
    """The whole test signal (its own noise seed) against its known components."""
    from training.frequency.config import SignalSpec
    from training.frequency.data import make_signal

    path = artifacts / "metrics.json"
    config = json.loads(path.read_text()).get("config", {}) if path.is_file() else {}
    settings: dict[str, Any] = {
        k: tuple(v) if isinstance(v, list) else v for k, v in config.get("signal", {}).items()
    }
    spec = SignalSpec(**settings)
    signal = make_signal(spec, config.get("test_seed", 2))  # the signal the report's test MSE is of
    body = {
        "signal": signal.mixed.tolist(),
        "sample_rate": spec.sample_rate,
        "frequencies": list(spec.frequencies),
    }
    reported = manifest["metrics"]["mse_stitched_test"]

    def judge(answers: list[Any], out: Outcome) -> None:
        (answer,) = answers
        for i, component in enumerate(answer["components"]):
            name = f"{component['frequency']:g}Hz"
            served = np.asarray(component["signal"], dtype=np.float64)
            target = signal.targets[i].astype(np.float64)
            mse = float(np.mean((served - target) ** 2))
            corr = float(np.corrcoef(served, target)[0, 1])
            limit = reported[name] * MSE_RATIO + MSE_SLACK
            out.check(mse <= limit, f"{name}: MSE {mse:.4f} against the known component "
                      f"(report {reported[name]:.4f}, at most {limit:.4f}), correlation {corr:.3f}")  # fmt: skip

    return HeldOut([body], judge)
