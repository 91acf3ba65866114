"""How far a record lies from the records training saw, taken together rather than feature by
feature: the Mahalanobis distance of its encoded values (`Schema.encode`), each passed through
asinh(v / scale) so that skewed columns (areas next to ratios) weigh alike, from the mean of the
training split under its covariance.

Per-feature ranges see a value outside the range; they do not see a record whose every value is
in range but whose values do not go together (each feature at its largest, columns swapped within
a record, a record assembled from columns of different records). Correlated features make such a
record far in this distance. Training fits it on the training split, sets the threshold past which
an answer is `out_of_distribution` on the validation split, and exports both (distance.npz and the
manifest's `ood_threshold`); serving reads them back and scores every record.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from handlers.errors import ArchiveError
from handlers.tensors import Output, Tensor

SCALE = 0.1
"""asinh(v / SCALE): linear within a tenth of a training range of the smallest value seen,
logarithmic past it."""
RIDGE = 1e-6
"""Added to the covariance's diagonal, relative to its mean: a constant column cannot make it
singular."""


@dataclass(frozen=True)
class Distance:
    mean: np.ndarray
    """(W,) mean of the transformed training records."""
    precision: np.ndarray
    """(W, W) inverse of their covariance (ridged)."""
    scale: float = SCALE
    threshold: float = np.inf
    """Distance past which a record is out of distribution (training sets it on validation)."""

    @classmethod
    def fit(cls, encoded: np.ndarray, scale: float = SCALE) -> Distance:
        z = np.arcsinh(np.asarray(encoded, np.float64) / scale)
        cov = np.atleast_2d(np.cov(z, rowvar=False))
        cov += RIDGE * max(float(np.mean(np.diag(cov))), 1e-12) * np.eye(len(cov))
        return cls(z.mean(0), np.linalg.inv(cov), scale)

    def __call__(self, encoded: np.ndarray) -> np.ndarray:
        """(N,) distances of (N, W) encoded records, float64."""
        d = np.arcsinh(np.asarray(encoded, np.float64) / self.scale) - self.mean
        return np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", d, self.precision, d), 0.0))

    def judge(self, distance: float) -> dict[str, Any]:
        """One answer row's fields: its distance (4 places) and whether it is past the threshold."""
        return {
            "distance": round(float(distance), 4),
            "out_of_distribution": bool(distance > self.threshold),
        }

    def save(self, path: str | Path) -> None:
        np.savez(path, mean=self.mean, precision=self.precision, scale=np.array(self.scale))

    @classmethod
    def load(cls, path: str | Path, width: int, threshold: float = np.inf) -> Distance:
        """distance.npz for records `width` wide, or ArchiveError naming what is wrong."""
        path = Path(path)
        if not path.is_file():
            raise ArchiveError(f"the archive has no {path.name} (the in-distribution score's fit)")
        try:
            data = np.load(path, allow_pickle=False)
            mean, precision = data["mean"].astype(np.float64), data["precision"].astype(np.float64)
            scale = float(data["scale"])
        except (OSError, ValueError, KeyError) as e:
            raise ArchiveError(f"{path.name} cannot be read: {e}") from e
        if mean.shape != (width,) or precision.shape != (width, width):
            raise ArchiveError(f"{path.name} is for records {mean.shape} wide, not ({width},)")
        return cls(mean, precision, scale, float(threshold))


OUTPUTS = (Tensor("distance", "FP64", (-1,)), Tensor("out_of_distribution", "BOOL", (-1,)))
"""The tensor view (handlers/tensors.py) of each answer row's `distance` and `out_of_distribution`."""


def outputs(rows: list[dict]) -> list[Output]:
    """JSON answer rows → the OUTPUTS tensors, values exactly as answered."""
    return [
        Output("distance", "FP64", np.array([r["distance"] for r in rows], np.float64)),
        Output(
            "out_of_distribution", "BOOL", np.array([bool(r["out_of_distribution"]) for r in rows])
        ),
    ]
