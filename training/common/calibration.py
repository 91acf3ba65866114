"""Calibration and uncertainty-quality maths on plain numpy arrays.

- `fit_temperature`: the single T minimising validation NLL of softmax(logits / T).
- `reliability_bins`: equal-width confidence bins (top-label), for the reliability diagram.
- `expected_calibration_error`: torchmetrics' own; `auroc`: scikit-learn's (exact in float64,
  where torchmetrics' curve is float32 and misses 1.0 for a perfect ranking by 6e-8).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from torchmetrics.functional.classification import multiclass_calibration_error


def _log_softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of the labels under softmax(logits / temperature)."""
    logp = _log_softmax(np.asarray(logits, np.float64) / temperature)
    return float(-logp[np.arange(len(labels)), labels].mean())


def fit_temperature(
    logits: np.ndarray, labels: np.ndarray, bounds: tuple[float, float] = (0.05, 20.0)
) -> float:
    """Golden-section search for T on log T: NLL(T) is unimodal in log T for a fixed set of logits
    (it is convex in 1/T), so the 1-D search needs no gradients and no scipy."""
    lo, hi = np.log(bounds[0]), np.log(bounds[1])
    inv_phi = (np.sqrt(5.0) - 1.0) / 2.0

    def f(log_t: float) -> float:
        return nll(logits, labels, float(np.exp(log_t)))

    a, b = hi - inv_phi * (hi - lo), lo + inv_phi * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(80):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - inv_phi * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + inv_phi * (hi - lo)
            fb = f(b)
    return float(np.exp((lo + hi) / 2.0))


@dataclass(frozen=True)
class ReliabilityBins:
    edges: np.ndarray
    """(n_bins + 1,) confidence bin edges on [0, 1]."""
    count: np.ndarray
    """(n_bins,) predictions per bin."""
    accuracy: np.ndarray
    """(n_bins,) fraction correct per bin (nan where empty)."""
    confidence: np.ndarray
    """(n_bins,) mean top-label confidence per bin (nan where empty)."""

    def to_dict(self) -> dict:
        def clean(a: np.ndarray) -> list:
            return [None if not np.isfinite(v) else round(float(v), 6) for v in a]

        return {
            "edges": clean(self.edges),
            "count": [int(c) for c in self.count],
            "accuracy": clean(self.accuracy),
            "confidence": clean(self.confidence),
        }


def reliability_bins(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> ReliabilityBins:
    """Top-label reliability: bin predictions by confidence, compare with their accuracy."""
    confidence = probs.max(axis=-1)
    correct = (probs.argmax(axis=-1) == labels).astype(np.float64)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # Right-closed bins, with confidence exactly 0 falling in the first.
    which = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, n_bins - 1)
    count = np.bincount(which, minlength=n_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.bincount(which, weights=correct, minlength=n_bins) / count
        conf = np.bincount(which, weights=confidence, minlength=n_bins) / count
    return ReliabilityBins(edges, count, acc, conf)


def expected_calibration_error(probs: np.ndarray, labels: np.ndarray, n_bins: int = 15) -> float:
    """Σ_bins (n_b / N) · |accuracy_b − confidence_b| (top-label, equal-width bins)."""
    p = torch.as_tensor(np.asarray(probs, np.float64))
    y = torch.as_tensor(np.asarray(labels, np.int64))
    return float(multiclass_calibration_error(p, y, num_classes=p.shape[-1], n_bins=n_bins))


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve = P(score of a random positive > a random negative), ties count ½;
    nan when either class is empty (scikit-learn would raise)."""
    positive = np.asarray(positive, bool)
    if positive.all() or not positive.any():
        return float("nan")
    return float(roc_auc_score(positive, np.asarray(scores, np.float64)))
