"""Calibration maths: temperature fit, ECE, reliability bins, AUROC."""

import numpy as np
import pytest

from handlers.uncertainty import softmax
from training.common.calibration import (
    auroc,
    expected_calibration_error,
    fit_temperature,
    nll,
    reliability_bins,
)


def _calibrated_sample(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Probabilities whose labels are drawn from them: calibrated by construction."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, size=(n, 2))
    probs = softmax(logits)
    labels = (rng.random(n) < probs[:, 1]).astype(np.int64)
    return logits, labels


def test_ece_of_perfectly_calibrated_data_is_near_zero():
    logits, labels = _calibrated_sample(200_000, seed=1)
    assert expected_calibration_error(softmax(logits), labels) < 0.01


def test_ece_of_overconfident_predictions_is_large():
    logits, labels = _calibrated_sample(50_000, seed=2)
    # Sharpening calibrated logits 4x makes every prediction too confident.
    assert expected_calibration_error(softmax(logits * 4.0), labels) > 0.1


@pytest.mark.parametrize("true_temperature", [0.5, 2.5])
def test_temperature_fit_recovers_a_known_temperature(true_temperature):
    logits, labels = _calibrated_sample(100_000, seed=3)
    # Labels are calibrated for `logits`; the model reports logits * T, so 1/T must be undone.
    fitted = fit_temperature(logits * true_temperature, labels)
    assert fitted == pytest.approx(true_temperature, rel=0.05)
    assert nll(logits * true_temperature, labels, fitted) < nll(logits * true_temperature, labels)


def test_reliability_bins_count_every_prediction_once():
    probs = softmax(np.random.default_rng(4).normal(size=(1000, 2)) * 3)
    labels = np.zeros(1000, np.int64)
    bins = reliability_bins(probs, labels, n_bins=10)
    assert bins.count.sum() == 1000
    # Two classes: top-label confidence is never below 0.5.
    assert bins.count[:5].sum() == 0
    used = bins.count > 0
    assert np.all(bins.confidence[used] >= bins.edges[:-1][used])
    assert np.all(bins.confidence[used] <= bins.edges[1:][used])


def test_auroc_matches_definition_with_ties():
    scores = np.array([0.1, 0.4, 0.35, 0.8, 0.4])
    positive = np.array([False, False, True, True, True])
    # Pairs (pos, neg): 0.35>0.1, 0.35<0.4, 0.8>both, 0.4>0.1, 0.4=0.4 → (1 + 0 + 2 + 1 + 0.5) / 6
    assert auroc(scores, positive) == pytest.approx(4.5 / 6)


def test_auroc_is_one_for_perfect_separation_and_half_for_noise():
    rng = np.random.default_rng(5)
    positive = rng.random(5000) < 0.3
    assert auroc(positive + rng.random(5000) * 0.5, positive) == 1.0
    assert auroc(rng.random(5000), positive) == pytest.approx(0.5, abs=0.03)
    assert np.isnan(auroc(rng.random(10), np.zeros(10, bool)))
