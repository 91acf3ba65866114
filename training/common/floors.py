"""Quality floors: the figures a trained model must reach before anything is exported or registered.

Each model's training config names its floors (None: off, as the `tiny` configs used by tests
have them); the pipeline measures the figures, calls `check_floors` before its export reaches the
artifact folder, and a miss raises `QualityError` with every figure and its floor. Nothing is
exported, no manifest is written, nothing is registered in MLflow, and `make train` (so
`make serve`) stops with the message. `staged_export` is where an export that is measured through
its own files (sentiment scores the ONNX file it serves) waits until the floors pass.
"""

from __future__ import annotations

import math
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


class QualityError(RuntimeError):
    """A trained model missed its config's quality floor: nothing is exported or registered.
    `figures`: the floored figures as measured (the MLflow run records them before it fails)."""

    def __init__(self, message: str, figures: dict[str, float] | None = None):
        super().__init__(message)
        self.figures = dict(figures or {})


@dataclass(frozen=True)
class Floor:
    figure: str
    """The metric's key in the figures `check_floors` is given."""
    limit: float | None
    """The floor; None: not checked (the tiny configs' setting)."""
    at_least: bool
    """True: the figure must be >= limit (accuracy); False: <= limit (ECE, MSE)."""
    what: str
    """The figure in words, for the message."""
    out_of: str | None = None
    """The figure holding how many items an accuracy is over (e.g. "test_size_imdb"): the report
    then gives its 95 % Wilson interval and the floor's margin below that interval's low end."""

    def missed(self, value: float) -> bool:
        if self.limit is None:
            return False
        return value < self.limit if self.at_least else value > self.limit

    def describe(self, value: float) -> str:
        verdict = "MISSED" if self.missed(value) else "met"
        return f"{self.what} {value:.4f} (floor {'>=' if self.at_least else '<='} {self.limit}: {verdict})"


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a rate of `k` in `n`."""
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def _entry(f: Floor, figures: Mapping[str, float]) -> dict:
    """One floor's report: the value and the floor; with `out_of`, the interval and the margin."""
    value = float(figures[f.figure])
    entry: dict = {"value": value, "floor": f.limit, "at_least": f.at_least}
    if f.out_of is not None and f.limit is not None:
        n = int(figures[f.out_of])
        low, high = wilson(round(value * n), n)
        entry |= {
            "items": n,
            "interval_95": [round(low, 4), round(high, 4)],
            "margin": round(low - f.limit if f.at_least else f.limit - high, 4),
        }
    return entry


def inside_noise(report: Mapping[str, Mapping]) -> list[str]:
    """The floors of a quality_floors report that sit inside their figure's sampling noise (the
    95 % interval reaches the floor): a CPU class whose kernels round differently, or another
    seed of the same recipe, could flip them. Empty: every floor with an interval clears it."""
    return [
        f"{figure} {entry['value']:.4f} of {entry['items']}: 95 % interval "
        f"[{entry['interval_95'][0]:.4f}, {entry['interval_95'][1]:.4f}] reaches the floor "
        f"{entry['floor']}"
        for figure, entry in report.items()
        if "margin" in entry and entry["margin"] <= 0
    ]


def check_floors(
    model: str, figures: Mapping[str, float], floors: Iterable[Floor], detail: str = ""
) -> dict[str, dict]:
    """Raise QualityError when a figure misses its floor (the message gives every checked figure
    and its floor, then `detail`); else the report for metrics.json: figure -> value and floor."""
    active = [f for f in floors if f.limit is not None]
    missed = [f for f in active if f.missed(figures[f.figure])]
    if missed:
        lines = "; ".join(f.describe(figures[f.figure]) for f in active)
        raise QualityError(
            f"{model} is below its quality floor ({lines}){': ' + detail if detail else ''}; "
            "nothing exported or registered",
            {f.figure: float(figures[f.figure]) for f in active},
        )
    return {f.figure: _entry(f, figures) for f in active}


def floor_report(figures: Mapping[str, float], floors: Iterable[Floor]) -> dict[str, dict]:
    """The floors measured but not enforced (a variant trained to be measured): figure -> value,
    floor and whether it was met, for metrics.json; never raises."""
    return {
        f.figure: _entry(f, figures) | {"met": not f.missed(figures[f.figure])}
        for f in floors
        if f.limit is not None
    }


@contextmanager
def staged_export(out: Path, files: Iterable[str]) -> Iterator[Path]:
    """A folder inside `out` to export into; on a clean exit `files` move into `out` (after the
    caller's floors passed inside the block), on an exception the folder and they are removed."""
    out = Path(out)
    stage = Path(tempfile.mkdtemp(prefix=".unchecked-", dir=out))
    try:
        yield stage
        for name in files:
            (stage / name).replace(out / name)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
