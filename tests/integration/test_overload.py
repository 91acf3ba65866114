"""Overload sheds instead of queueing: the per-batch work budget answers a fast 503 with
Retry-After over a real TorchServe, and a full queue refuses at once. The mixed-load Locust run
with the full-size model is `python -m reliability.overload` (make reliability)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from deploy.archive import build_archive
from tests.support.torchserve import start_torchserve

pytestmark = [pytest.mark.integration, pytest.mark.serial]

BUDGET = 40
"""Tokens per batch: one 32-token text fits, two do not."""


@pytest.fixture(scope="module")
def budget_server(sentiment_artifacts, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("budget")
    mar = build_archive(
        "sentiment",
        sentiment_artifacts,
        tmp / "mar",
        build_dir=tmp / "build",
        # A long batch window so simultaneous requests share a batch.
        overrides={"maxBatchDelay": 300, "handler": {"max_batch_tokens": BUDGET}},
    )
    server = start_torchserve(tmp, {"sentiment": mar})
    yield server
    server.stop()


def test_requests_past_the_batch_budget_get_503_with_retry_after_and_a_reason(budget_server):
    url = f"{budget_server.inference_url}/predictions/sentiment"
    headers = budget_server.auth() | {"Content-Type": "application/json"}
    long_text = json.dumps({"text": "a long review about the plot and the cast " * 20})

    def send(_):
        return requests.post(url, data=long_text, headers=headers, timeout=60)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(send, range(8)))
    statuses = sorted(r.status_code for r in answers)
    assert set(statuses) <= {200, 503}, statuses
    assert 200 in statuses, statuses
    refused = [r for r in answers if r.status_code == 503]
    assert refused, f"8 simultaneous 32-token requests fit a {BUDGET}-token budget: {statuses}"
    for r in refused:
        assert r.headers["Retry-After"] == "1"
        assert r.reason == "Service Unavailable"
        assert r.json()["kind"] == "overloaded"
    # Nothing is wedged: a lone request is served.
    assert send(0).status_code == 200
