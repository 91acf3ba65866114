"""The frequency model says when a signal changes in time: an amplitude that steps half-way, a
component that switches on after 1 s, 3.2 Hz instead of 3, a constant offset. Signals of a
held-out generator training never uses (tests/support/changing_signals.py, its own seeds here),
judged with the thresholds the training code sets (training/frequency/ood.py), and asked as
served: the full-size model's one-shot answers and streams.

Each changed signal must be flagged out of distribution, or its +-2 std band must hold at least
0.85 of its true samples; the in-family controls of the same generator are flagged at most 5 % of
the time (the rate and its 95 % Wilson interval are in the assertion messages). Streams are judged
on everything they have seen: not before 1,000 samples, the nonstationarity from 2,000.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from handlers.frequency import stationarity
from handlers.frequency.codec import SignalRequest
from handlers.frequency.ood import residual
from handlers.frequency.predict import FrequencyPredictor, judgement
from tests.support.changing_signals import CONDITIONS, FREQUENCIES, RATE, draw, wilson
from tests.support.full_size import require_full_size
from training.frequency.config import CONFIGS
from training.frequency.ood import ood_threshold, stationarity_thresholds

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "artifacts" / "frequency"
SEED = 5151  # none of the training config's seeds
CFG = CONFIGS["default"]
SELECTORS = tuple(range(len(FREQUENCIES)))
KEY = b"a-key-for-the-nonstationary-test"


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


# --- the full-size model, as served -------------------------------------------------------


@pytest.fixture(scope="module")
def predictor() -> FrequencyPredictor:
    require_full_size(ARTIFACTS)
    return FrequencyPredictor.from_dir(ARTIFACTS, {"runtime": "onnx", "threads": 1},
                                       state_key=KEY)  # fmt: skip


def coverage(body: dict, truth: np.ndarray) -> float:
    answer = np.array([c["signal"] for c in body["components"]], dtype=np.float64)
    std = np.array([c["std"] for c in body["components"]], dtype=np.float64)
    return float(np.mean(np.abs(truth - answer) <= 2 * std))


def one_shot(predictor, signals) -> list[dict]:
    reqs = [SignalRequest(x, RATE, FREQUENCIES, SELECTORS) for x in signals]
    return [a.to_body() for a in predictor.predict(reqs)]


def test_full_size_flags_each_change_or_its_band_covers(predictor, thresholds):
    s = predictor.settings
    assert (s.ood_threshold, s.nonstationarity_threshold, s.offset_threshold) == pytest.approx(
        thresholds
    )
    rng = np.random.default_rng(SEED + 20)
    report = []
    for condition in CONDITIONS:
        drawn = [draw(rng, condition, 2000) for _ in range(20)]
        bodies = one_shot(predictor, [x for x, _ in drawn])
        flagged = [b["out_of_distribution"] is True for b in bodies]
        cover = [coverage(b, truth) for b, (_, truth) in zip(bodies, drawn, strict=True)]
        report.append(f"{condition}: flagged {sum(flagged)}/20, coverage {np.mean(cover):.2f}")
        assert all(f or c >= 0.85 for f, c in zip(flagged, cover, strict=True)), report
        assert sum(flagged) >= 18, report
    controls = [draw(rng, "control", 2000) for _ in range(100)]
    bodies = one_shot(predictor, [x for x, _ in controls])
    false = sum(b["out_of_distribution"] is True for b in bodies)
    lo, hi = wilson(false, len(bodies))
    cover = np.mean([coverage(b, t) for b, (_, t) in zip(bodies, controls, strict=True)])
    report.append(
        f"control: false flags {false}/100 (95 % {lo:.3f}-{hi:.3f}), coverage {cover:.2f}"
    )
    assert false <= 5 and cover >= 0.85, report


def stream(predictor, x: np.ndarray, chunk: int = 250) -> list[dict]:
    """The signal sent as a stream, `chunk` samples a chunk: every chunk's answer body."""
    bodies, state = [], None
    for lo in range(0, x.shape[0], chunk):
        part = x[lo : lo + chunk]
        if state is None:
            req = SignalRequest(part, RATE, FREQUENCIES, SELECTORS, start=True)
        else:
            req = SignalRequest(part, RATE, FREQUENCIES, SELECTORS, state=state)
        [answer] = predictor.predict([req])
        body = answer.to_body()
        bodies.append(body)
        state = body["state"]
    return bodies


def test_full_size_streams_flag_once_they_have_seen_two_seconds(predictor):
    rng = np.random.default_rng(SEED + 30)
    for condition in CONDITIONS:
        for _ in range(3):
            bodies = stream(predictor, draw(rng, condition, 3000)[0])
            seen = [b["samples_seen"] for b in bodies]
            flags = [b["out_of_distribution"] for b in bodies]
            assert all(f is None for n, f in zip(seen, flags, strict=True) if n < 1000), flags
            assert all(f is True for n, f in zip(seen, flags, strict=True) if n >= 2000), (
                condition, flags,
            )  # fmt: skip
    controls = [stream(predictor, draw(rng, "control", 3000)[0]) for _ in range(20)]
    false = sum(bodies[-1]["out_of_distribution"] is True for bodies in controls)
    assert false <= 2, f"streams of controls flagged: {false}/20"
