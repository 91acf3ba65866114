"""The parity gate: an export may be archived only if it reproduces the eager model.

Each case is a set of inputs at a shape the export never saw; every output of every exported
runtime must match eager within `atol`. A failure raises `ParityError` and nothing is written after.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np

Outputs = dict[str, np.ndarray]


class ParityError(RuntimeError):
    pass


@dataclass(frozen=True)
class ParityCase:
    name: str
    """Human label, e.g. 'batch=7 seq=77'."""
    inputs: dict[str, np.ndarray]


def check_parity(
    eager: Callable[[dict[str, np.ndarray]], Outputs],
    exported: Mapping[str, Callable[[dict[str, np.ndarray]], Outputs]],
    cases: Iterable[ParityCase],
    atol: float,
) -> dict:
    """Run every case through eager and each exported runtime; return the report or raise."""
    report: dict = {"atol": atol, "cases": [], "max_abs_diff": {}}
    failures = []
    for case in cases:
        want = eager(case.inputs)
        diffs: dict[str, float] = {}
        row = {"case": case.name, "max_abs_diff": diffs}
        for runtime, fn in exported.items():
            got = fn(case.inputs)
            diff = max(
                float(np.max(np.abs(got[k] - want[k]))) if want[k].size else 0.0 for k in want
            )
            diffs[runtime] = diff
            report["max_abs_diff"][runtime] = max(report["max_abs_diff"].get(runtime, 0.0), diff)
            if not np.isfinite(diff) or diff > atol:
                failures.append(f"{runtime} at {case.name}: max |diff| {diff:.3g} > {atol:g}")
        report["cases"].append(row)
    report["passed"] = not failures
    if failures:
        raise ParityError("export does not match eager: " + "; ".join(failures))
    return report
