"""Load test pieces without a server: shapes over time, the SLO verdict, payloads, task weights."""

from __future__ import annotations

import json

from loadtests.payloads import Payloads, bench_feed, parse_weights
from loadtests.shapes import ShapeSettings, spike, steady_ramp
from loadtests.slo import SloBounds, judge
from tools.frequency.samples import synthetic_signal
from tools.sentiment.samples import LENGTH_BUCKETS, held_out_reviews

SHAPE = ShapeSettings(users=4, duration_s=30, ramp_s=8, spike_users=20, spike_at_s=10, spike_s=5)


def test_steady_ramp_holds_its_users_then_stops():
    assert steady_ramp(0, SHAPE) == (4, 1.0)  # 4 users over 8 s: 0.5/s, floored to 1/s
    assert steady_ramp(29.9, SHAPE)[0] == 4
    assert steady_ramp(30, SHAPE) is None


def test_spike_jumps_for_its_window_and_returns_to_baseline():
    users = [spike(t, SHAPE)[0] for t in (0, 9.9, 10, 14.9, 15, 29)]
    assert users == [4, 4, 20, 20, 4, 4]
    assert spike(10, SHAPE)[1] >= 20  # the spike arrives within about a second
    assert spike(30, SHAPE) is None


def test_slo_passes_fast_clean_runs_and_counts_each_protocol():
    verdict = judge(20, 0, 30.0, {"REST": 10, "GRPC": 10}, SloBounds(p95_ms=100))
    assert verdict.passed and verdict.by_protocol == {"REST": 10, "GRPC": 10}
    assert json.loads(verdict.to_json())["passed"] is True


def test_slo_fails_on_any_failure_and_on_slow_p95():
    failing = judge(10, 1, 10.0, {"REST": 10}, SloBounds(p95_ms=100))
    assert not failing.passed and "1 failed" in failing.violations[0]
    slow = judge(10, 0, 500.0, {"GRPC": 10}, SloBounds(p95_ms=100))
    assert not slow.passed and "p95" in slow.violations[0]
    assert not judge(0, 0, 0.0, {}, SloBounds()).passed  # no traffic is not a pass
    assert judge(10, 2, 10.0, {"REST": 10}, SloBounds(max_failures=2)).passed


def test_reviews_are_held_out_and_cover_every_length_bucket():
    from training.sentiment.data import load_splits

    reviews = held_out_reviews()
    train = set(load_splits().train.text)
    assert reviews and not train.intersection(reviews)
    sizes = [len(r.encode()) for r in reviews]
    for lo, hi in LENGTH_BUCKETS:
        assert any(lo <= s < hi for s in sizes), (lo, hi)


def test_payloads_are_valid_requests_of_varied_shape():
    payloads = Payloads(seed=1, signal_lengths=(100, 400), reviews=("a", "b", "c", "d", "e"))
    bodies = [payloads.for_model("frequency") for _ in range(20)]
    assert {len(b["signal"]) for b in bodies} == {100, 400}
    assert all(
        set(b["frequencies"]) <= {1.0, 3.0, 5.0, 7.0} and b["sample_rate"] == 1000 for b in bodies
    )
    texts = [payloads.for_model("sentiment_ts") for _ in range(40)]
    assert any("text" in t for t in texts) and any(len(t.get("texts", [])) == 4 for t in texts)


def test_synthetic_signal_is_reproducible_and_carries_its_tones():
    import numpy as np

    a, b = synthetic_signal(2000, seed=5), synthetic_signal(2000, seed=5)
    assert np.array_equal(a, b) and a.dtype == np.float32
    spectrum = np.abs(np.fft.rfft(a))
    freqs = np.fft.rfftfreq(2000, 1 / 1000)
    top = set(np.round(freqs[np.argsort(spectrum)[-4:]]).tolist())
    assert top == {1.0, 3.0, 5.0, 7.0}


def test_task_weights_parse_model_and_weight():
    assert parse_weights("sentiment:3, frequency") == {"sentiment": 3, "frequency": 1}
    assert parse_weights("") == {
        "sentiment": 3,
        "frequency": 1,
        "digits": 1,
        "tabular": 1,
    }  # registry LOAD_WEIGHTs


def test_bench_feed_is_one_unit_of_one_shape_per_request():
    signals = bench_feed("frequency", 5, signal_samples=300)
    assert {len(b["signal"]) for b in signals} == {300}
    assert all(b["frequencies"] == [1.0, 3.0, 5.0, 7.0] for b in signals)
    texts = bench_feed("sentiment_onnx", 5)
    assert all(set(t) == {"text"} for t in texts)
