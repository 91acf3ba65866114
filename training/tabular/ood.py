"""The in-distribution score's fit and threshold (handlers/kits/tabular/distance.py): the
Mahalanobis distance fitted on the training split, its threshold the QUANTILE of the validation
split's distances (the selection split: records the fit never saw), and its false-flag rate
measured on the test split, with a Wilson interval."""

from __future__ import annotations

import numpy as np

from handlers.kits.tabular.distance import Distance
from training.common.floors import wilson
from training.common.parity import ParityError

QUANTILE = 0.975
"""Of the validation split's distances: the threshold. Held-out records are flagged about
1 - QUANTILE of the time (the target is at most 5 %, a margin for a 69-record selection split)."""
PARITY_ATOL = 1e-6
"""The exported distance.npz against a float64 solve with the training split's covariance."""


def rate(flags: np.ndarray) -> dict:
    k, n = int(np.sum(flags)), len(flags)
    low, high = wilson(k, n)
    return {"flagged": k, "records": n, "rate": round(k / max(n, 1), 4),
            "interval_95": [round(low, 4), round(high, 4)]}  # fmt: skip


def fit(train: np.ndarray, val: np.ndarray) -> Distance:
    """Fitted on the training split's encoded records, its threshold set on the validation split's."""
    distance = Distance.fit(train)
    threshold = float(np.quantile(distance(val), QUANTILE))
    return Distance(distance.mean, distance.precision, distance.scale, round(threshold, 4))


def parity(distance: Distance, train: np.ndarray, records: np.ndarray) -> dict:
    """The exported fit's distances against an independent computation (a float64 linear solve
    with the same ridged covariance, no inverse): ParityError past PARITY_ATOL."""
    from handlers.kits.tabular.distance import RIDGE

    z = np.arcsinh(train.astype(np.float64) / distance.scale)
    cov = np.atleast_2d(np.cov(z, rowvar=False))
    cov += RIDGE * max(float(np.mean(np.diag(cov))), 1e-12) * np.eye(len(cov))
    d = np.arcsinh(records.astype(np.float64) / distance.scale) - z.mean(0)
    want = np.sqrt(np.einsum("ij,ij->i", d, np.linalg.solve(cov, d.T).T))
    diff = float(np.max(np.abs(distance(records) - want)))
    if not diff <= PARITY_ATOL * max(1.0, float(want.max())):
        raise ParityError(f"distance.npz: {diff} from the float64 solve on {len(records)} records")
    return {"records": len(records), "max_abs_diff": diff}
