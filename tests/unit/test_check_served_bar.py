"""The bar make check-served (deploy/check_served.py, training/common/heldout.py) holds the served models to: the review count a model as good as
its report reaches (binomial), and answers compared field by field."""

from __future__ import annotations

import math

from deploy.check_served import differences
from training.common.heldout import ALPHA, binomial_floor


def _below(n: int, p: float, k: int) -> float:
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k))


def test_the_review_floor_is_the_largest_count_a_good_model_misses_rarely():
    for n, p in ((48, 0.9016), (48, 0.5), (10, 0.9), (297, 0.9865)):
        k = binomial_floor(n, p)
        assert _below(n, p, k) <= ALPHA < _below(n, p, k + 1)
    assert binomial_floor(48, 0.9016) == 36  # 75 %: a coin-flip model (about 24) fails it
    assert binomial_floor(48, 1.0) == 48 and binomial_floor(48, 0.0) == 0


def test_answers_differ_where_a_field_or_a_number_beyond_the_tolerance_does():
    a = {"label": "positive", "probabilities": {"negative": 0.1, "positive": 0.9}, "n": [1, 2]}
    assert differences(a, a) == []
    b = {
        "label": "positive",
        "probabilities": {"negative": 0.10001, "positive": 0.89999},
        "n": [1, 2],
    }
    assert differences(a, b, atol=1e-4) == []
    assert differences(a, b) == [
        ".probabilities.negative: 0.1 vs 0.10001",
        ".probabilities.positive: 0.9 vs 0.89999",
    ]
    assert differences(a, a | {"label": "negative"}) == [".label: 'positive' vs 'negative'"]
    assert differences(a, a | {"n": [1]}) == [".n: 2 vs 1 items"]
    # A refusal where answers were: one line, each side cut to 120 characters.
    (whole,) = differences([a] * 3, {"error": "busy"})
    assert whole == ".: " + repr([a] * 3)[:117] + "... vs {'error': 'busy'}"
    assert differences(True, 1) == [".: True vs 1"]
