"""Calibration and uncertainty-quality maths on plain numpy arrays.

- `fit_temperature`: the single T minimising validation NLL of softmax(logits / T).
- `reliability_bins` / `expected_calibration_error`: equal-width confidence bins (top-label).
- `auroc`: does a score rank positives (e.g. the model's errors, or OOD inputs) above the rest?
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
    """Σ_bins (n_b / N) · |accuracy_b − confidence_b|."""
    bins = reliability_bins(probs, labels, n_bins)
    used = bins.count > 0
    weights = bins.count[used] / bins.count.sum()
    return float((weights * np.abs(bins.accuracy[used] - bins.confidence[used])).sum())


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Area under the ROC curve = P(score of a random positive > a random negative), ties count ½.

    Mann-Whitney U with average ranks; nan when either class is empty.
    """
    scores = np.asarray(scores, np.float64)
    positive = np.asarray(positive, bool)
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    sorted_scores = scores[order]
    ranks = np.empty(len(scores), np.float64)
    # Average rank within each run of tied scores.
    starts = np.flatnonzero(np.r_[True, sorted_scores[1:] != sorted_scores[:-1]])
    ends = np.r_[starts[1:], len(scores)]
    for s, e in zip(starts, ends, strict=True):
        ranks[order[s:e]] = (s + e + 1) / 2.0
    u = ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))
