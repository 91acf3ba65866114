"""The frequency model says when a signal changes in time: an amplitude that steps half-way, a
component that switches on after 1 s, 3.2 Hz instead of 3, a constant offset. Signals of a
held-out generator training never uses (tests/support/changing_signals.py, its own seeds here),
judged with the thresholds the training code sets (training/frequency/ood.py); the full-size
model asked as served: tests/unit/test_frequency_changing_full_size.py.

At least 95 % of each condition's signals must be flagged out of distribution; the in-family
controls of the same generator at most 5 % (the rates and their 95 % Wilson intervals are in the
assertion messages). A stream's judgement after n samples is a one-shot request's of those n.
"""

from __future__ import annotations

import numpy as np
import pytest

from handlers.frequency import stationarity
from handlers.frequency.ood import residual
from handlers.frequency.predict import judgement
from tests.support.changing_signals import CONDITIONS, FREQUENCIES, RATE, draw
from training.common.floors import wilson
from training.frequency.config import CONFIGS
from training.frequency.ood import ood_threshold, stationarity_thresholds

SEED = 5151  # none of the training config's seeds
CFG = CONFIGS["default"]


@pytest.fixture(scope="module")
def thresholds() -> tuple[float, float, float]:
    return (ood_threshold(CFG), *stationarity_thresholds(CFG))


def judged(x: np.ndarray, thresholds):
    m = stationarity.measures(stationarity.of_signal(x, RATE, FREQUENCIES), RATE, FREQUENCIES)
    res = residual(x, RATE, FREQUENCIES)
    return judgement(res, m.nonstationarity, m.offset, *thresholds)


def test_in_family_controls_are_rarely_flagged(thresholds):
    rng = np.random.default_rng(SEED)
    flags = [judged(draw(rng, "control", n)[0], thresholds) for n in [2000, 3000] * 200]
    hits = sum(j.out_of_distribution is True for j in flags)
    lo, hi = wilson(hits, len(flags))
    assert all(j.out_of_distribution is not None for j in flags)
    assert hits / len(flags) <= 0.05, f"false flags {hits}/{len(flags)} (95 % {lo:.3f}-{hi:.3f})"
    # the thresholds come from the selection split, not from these
    assert CFG.stationarity_seed != SEED and CFG.ood_seed != SEED


@pytest.mark.parametrize("condition", CONDITIONS)
def test_each_change_is_flagged(thresholds, condition):
    rng = np.random.default_rng(SEED + 1 + CONDITIONS.index(condition))
    flags = [judged(draw(rng, condition, n)[0], thresholds) for n in [2000, 3000] * 50]
    hits = sum(j.out_of_distribution is True for j in flags)
    lo, hi = wilson(hits, len(flags))
    assert hits / len(flags) >= 0.95, f"{condition}: {hits}/{len(flags)} (95 % {lo:.3f}-{hi:.3f})"


def test_a_stream_is_judged_on_what_it_has_seen_as_a_one_shot_request_is():
    rng = np.random.default_rng(SEED + 10)
    x = draw(rng, "step", 3000)[0]
    stats = stationarity.Stats.zero(len(FREQUENCIES))
    seen = 0
    for size in (1, 249, 333, 417, 500, 700, 800):
        stats = stationarity.update(stats, x[seen : seen + size], seen, RATE, FREQUENCIES)
        seen += size
        once = stationarity.of_signal(x[:seen], RATE, FREQUENCIES)
        a = stationarity.measures(stats, RATE, FREQUENCIES)
        b = stationarity.measures(once, RATE, FREQUENCIES)
        assert stats.windows == seen // 1000 == once.windows
        for got, want in zip(vars(a).values(), vars(b).values(), strict=True):
            assert (got is None) == (want is None)
            assert got is None or got == pytest.approx(want, abs=2e-6)
        assert (a.offset is None) == (seen < 1000) and (a.nonstationarity is None) == (seen < 2000)
    back = stationarity.Stats.from_array(stats.to_array(), len(FREQUENCIES))
    assert np.array_equal(back.to_array(), stats.to_array()) and back.valid(len(FREQUENCIES))
