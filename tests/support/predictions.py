"""The one comparison of a sentiment answer with the in-process predictor's, for every tier."""

from __future__ import annotations

import pytest

PREDICTION_ATOL = 1e-5
"""Batching (padding width, batch neighbours) and the runtime's thread split move float32 results
by ~1e-7; a wrong head, temperature or truncation moves them by far more than this."""


def assert_same_prediction(got: dict, want: dict) -> None:
    assert got["label"] == want["label"]
    assert got["truncated"] == want["truncated"]
    assert got["model"] == want["model"]
    assert got["probabilities"].keys() == want["probabilities"].keys()
    for lab, p in want["probabilities"].items():
        assert got["probabilities"][lab] == pytest.approx(p, abs=PREDICTION_ATOL)
    assert got["uncertainty"].keys() == want["uncertainty"].keys()
    for key, value in want["uncertainty"].items():
        assert got["uncertainty"][key] == pytest.approx(value, abs=PREDICTION_ATOL)
