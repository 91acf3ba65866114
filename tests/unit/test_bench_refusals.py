"""`make bench` counts the bounded queue's refusals apart from errors, and fails only on errors.

A level above what a model takes at once (frequency's jobQueueSize 16 at 32 clients) is refused
with 503 `overloaded` by design; those refusals were counted as errors and the run exited 1."""

from __future__ import annotations

import itertools
import threading

import pytest

import bench.served
from bench.report import failures, markdown_table
from bench.served import paced_load, served_load
from clients.errors import ConnectionFailed, Overloaded, ServerError
from clients.settings import ClientSettings


class FakeClient:
    """Answers in turn: ok, refused as overloaded, ok, ... (or raises `error` every 4th call)."""

    calls = itertools.count()
    lock = threading.Lock()

    def __init__(self, error: Exception | None = None):
        self.error = error

    def predict(self, model, payload):
        with self.lock:
            n = next(self.calls)
        if self.error is not None and n % 4 == 3:
            raise self.error
        if n % 2:
            raise Overloaded("Model has no worker to serve inference request", status=503)
        return {"ok": True}

    def close(self):
        pass


@pytest.fixture
def fake_server(monkeypatch):
    def use(error: Exception | None = None):
        FakeClient.calls = itertools.count()
        monkeypatch.setattr(bench.served, "connect", lambda *a, **k: FakeClient(error))

    return use


def test_overloaded_refusals_are_counted_apart_from_errors(fake_server):
    fake_server()
    level = served_load(ClientSettings(), "frequency", [{}] * 40, concurrency=4)
    assert level["refused"] == 20 and level["errors"] == 0
    assert level["rps"] > 0 and level["p50_ms"] == level["p50_ms"]  # answered calls are timed


@pytest.mark.parametrize("error", [ServerError("boom"), ConnectionFailed("down")])
def test_other_failures_are_errors(fake_server, error):
    fake_server(error)
    level = served_load(ClientSettings(), "frequency", [{}] * 40, concurrency=4)
    assert level["errors"] == 10 and level["refused"] > 0


def test_paced_levels_count_refusals_too(fake_server):
    fake_server()
    level = paced_load(ClientSettings(), "frequency", [{}] * 20, rate=400.0, workers=2)
    assert level["refused"] == 10 and level["errors"] == 0


def _report(served: list[dict], paced: list[dict] | None = None) -> dict:
    return {
        "created": "2026-01-01T00:00:00Z",
        "machine": {"cpus": 2, "platform": "linux"},
        "versions": {"torch": "2.13.0", "onnxruntime": "1.32.0", "torchserve": "0.12.0"},
        "settings": {"artifacts": "a", "requests": 64, "protocols": ["rest"]},
        "results": [
            {
                "model": "frequency",
                "runtime": "onnx",
                "in_process": {"batch_size": 8, "threads": 1, "rps": 10.0},
                "served": served,
                "paced": paced or [],
            }
        ],
    }


def _level(c: int, rps: float, refused: int = 0, errors: int = 0) -> dict:
    return {
        "concurrency": c,
        "protocol": "rest",
        "requests": 4 * c,
        "rps": rps,
        "p50_ms": 10.0,
        "p95_ms": 20.0,
        "p99_ms": 30.0,
        "refused": refused,
        "errors": errors,
    }


def test_a_run_with_refusals_only_has_not_failed_and_reports_them():
    report = _report([_level(1, 9.0), _level(32, 8.0, refused=70)])
    assert failures(report) == []
    row = next(line for line in markdown_table(report).splitlines() if "| 32 |" in line)
    assert "| 70 | 0 |" in row  # refused, then errors


def test_errors_or_a_level_with_no_answer_fail_the_run():
    assert failures(_report([_level(1, 9.0), _level(32, 8.0, refused=3, errors=2)])) == [
        "frequency onnx json rest x32: 2 of 128 calls failed"
    ]
    everything_refused = _report([_level(32, 0.0, refused=128)])
    assert failures(everything_refused) == [
        "frequency onnx json rest x32: no call was answered (128 refused)"
    ]
