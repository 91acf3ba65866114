"""Malformed bodies against every served model: a 4xx with a JSON reason or a valid prediction,
never a 5xx, and no worker restarted by any of it."""

from __future__ import annotations

import json
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deploy.serving import read_properties
from reliability.bodies import Body, malformed_bodies, valid_example
from reliability.load import burst
from reliability.probes import judge_answer, worker_identity
from reliability.record import fuzz_examples, record
from tests.support.torchserve import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.serial]

NAMED_BODIES = [
    Body("wrong-content-type", "image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
    Body("xml", "application/xml", b"<text>hello</text>"),
    Body("truncated-json", "application/json", b'{"text": "an unfinished'),
    Body("nested-100000", "application/json", b"[" * 100_000 + b"]" * 100_000),
    Body("nested-object", "application/json", b'{"a":' * 50_000 + b"1" + b"}" * 50_000),
    Body("huge-number", "application/json", b'{"text": 1' + b"0" * 5000 + b"}"),
    Body("nan", "application/json", b'{"text": NaN, "signal": [NaN, Infinity, -Infinity]}'),
    Body(
        "control-chars", "application/json", json.dumps({"text": "\x00\x01\x1b[31m\x7f"}).encode()
    ),
    Body("invalid-utf8", "application/json", b'{"text": "\xff\xfe\xc3\x28"}'),
    Body("invalid-utf8-text", "text/plain", b"\xff\xfe\xc3\x28"),
    Body("lone-surrogate", "application/json", b'{"text": "\\ud800"}'),
    Body("empty", "application/json", b""),
    Body("empty-text-plain", "text/plain", b""),
    Body("json-null", "application/json", b"null"),
    Body("json-list", "application/json", b"[1, 2, 3]"),
    Body("big-under-limit", "application/json", json.dumps({"text": "x" * 900_000}).encode()),
    # What killed workers in TorchServe 0.12 when a reason phrase repeated it (a non-ASCII reason).
    Body("non-ascii-content-type", "", b'{"text": "fine"}', (("Content-Type", "tëxt/ü".encode()),)),
    Body(
        "latin1-content-type",
        "",
        b'{"text": "fine"}',
        (("Content-Type", "tëxt/ü".encode("latin-1")),),
    ),
    Body(
        "arabic-indic-sample-rate",
        "application/json",
        json.dumps({"signal": [0.5] * 64, "sample_rate": "١٠"}).encode(),
    ),
    Body(
        "non-ascii-sample-rate-header",
        "application/octet-stream",
        b"\0\0\0\0" * 64,
        (("X-Sample-Rate", "١٠٠٠".encode()), ("X-Frequencies", "٣".encode())),
    ),
    Body(
        "non-ascii-stream-flag",
        "application/octet-stream",
        b"\0\0\0\0" * 64,
        (("X-Stream", "stärt".encode()),),
    ),
    Body(
        "non-ascii-stream-state",
        "application/json",
        json.dumps({"signal": [0.5] * 64, "state": "ü" * 20}).encode(),
        (("X-Stream-State", "ü".encode()),),
    ),
    Body("gzip", "application/json", b"\x1f\x8b\x08\x00", (("Content-Encoding", b"gzip"),)),
    Body(
        "multipart-two-parts",
        "multipart/form-data; boundary=xyz",
        b"--xyz\r\nContent-Disposition: form-data; name=a\r\n\r\n{}\r\n"
        b"--xyz\r\nContent-Disposition: form-data; name=b\r\n\r\n{}\r\n--xyz--\r\n",
    ),
]


def post(target, model: str, body: Body) -> requests.Response:
    headers = target.server.auth() | body.request_headers()
    return requests.post(
        f"{target.server.inference_url}/predictions/{model}",
        data=body.data,
        headers=headers,
        timeout=60,
    )


def management_key(target) -> str:
    return target.server.keys["management"]


def test_every_served_model_answers_its_valid_example(fuzz_target):
    """The fuzzer damages these examples: they must be what the models actually accept."""
    for model in fuzz_target.models:
        r = post(
            fuzz_target,
            model,
            Body("valid", "application/json", json.dumps(valid_example(model)).encode()),
        )
        assert r.status_code == 200, (model, r.status_code, r.text[:300])


@pytest.mark.parametrize("body", NAMED_BODIES, ids=lambda b: b.kind)
def test_named_malformed_body_gets_4xx_reason_or_prediction(fuzz_target, body):
    for model in fuzz_target.models:
        r = post(fuzz_target, model, body)
        verdict = judge_answer(r.status_code, r.content, r.headers.get("Content-Type", ""))
        assert verdict.ok, f"{model} {body!r}: {verdict.why}"


def test_fuzzed_bodies_never_5xx_and_never_restart_a_worker(fuzz_target):
    models = fuzz_target.models
    url, key = fuzz_target.server.management_url, management_key(fuzz_target)
    before = worker_identity(url, key, models)
    seen: Counter = Counter()
    failures: list[str] = []

    @settings(
        max_examples=fuzz_examples(),
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(data=st.data())
    def run(data):
        model = data.draw(st.sampled_from(models), label="model")
        body = data.draw(malformed_bodies(model), label="body")
        r = post(fuzz_target, model, body)
        verdict = judge_answer(r.status_code, r.content, r.headers.get("Content-Type", ""))
        seen[(model, r.status_code)] += 1
        if not verdict.ok:
            failures.append(f"{model} {body!r}: {verdict.why}")
        assert verdict.ok, failures[-1]

    started = time.monotonic()
    try:
        run()
    finally:
        after = worker_identity(url, key, models)
        restarts = sum(len(before[m] - after[m]) for m in models)
        record(
            "fuzz",
            models=models,
            real_models=fuzz_target.real,
            inputs=sum(seen.values()),
            statuses={f"{m}:{s}": n for (m, s), n in sorted(seen.items())},
            server_errors=sum(n for (_, s), n in seen.items() if s >= 500),
            failures=failures[:20],
            worker_restarts=restarts,
            seconds=round(time.monotonic() - started, 1),
        )
    assert after == before, f"workers changed during the fuzz run: {before} -> {after}"


def send_body(server, model: str, body: Body) -> int:
    headers = server.auth() | body.request_headers()
    url = f"{server.inference_url}/predictions/{model}"
    return requests.post(url, data=body.data, headers=headers, timeout=60).status_code


WAVE = 8
"""Requests sent at the same instant: the models' batchSize."""


def test_bad_bodies_do_not_fail_good_requests_sent_alongside(fuzz_target):
    """Sent at the same instant, so they share batches where the model batches."""
    nasty = [b for b in NAMED_BODIES if not b.kind.startswith("big")]
    server = fuzz_target.server
    for model in fuzz_target.models:
        good = Body("good", "application/json", json.dumps(valid_example(model)).encode())
        mixed = [x for b in nasty for x in (b, good)]
        # In waves of one batch: all at once would overflow the model's bounded queue (jobQueueSize)
        # and the surplus would get the overload 503, which is not what this test is about.
        statuses = []
        with ThreadPoolExecutor(WAVE) as pool:
            for start in range(0, len(mixed), WAVE):
                wave = mixed[start : start + WAVE]
                statuses += list(pool.map(partial(send_body, server, model), wave))
        answers = list(zip([b.kind for b in mixed], statuses, strict=True))
        assert all(s == 200 for kind, s in answers if kind == "good"), (model, answers)
        assert all(s < 500 for s in statuses), (model, answers)


def inference_requests_total(metrics_url: str, model: str) -> float:
    text = requests.get(f"{metrics_url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("ts_inference_requests_total") and f'model_name="{model}"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_body_over_max_request_size_gets_413_before_reaching_the_model(fuzz_target):
    limit = int(read_properties(ROOT / "config.properties")["max_request_size"])
    server, model = fuzz_target.server, fuzz_target.models[0]
    counted = inference_requests_total(server.metrics_url, model)
    body = json.dumps({"text": "x" * limit}).encode()
    assert len(body) > limit
    r = post(fuzz_target, model, Body("oversize", "application/json", body))
    assert r.status_code == 413, (r.status_code, r.text[:200])
    assert "label" not in r.text and "prediction" not in r.text
    assert inference_requests_total(server.metrics_url, model) == counted, (
        "the oversize body reached the model"
    )
    # The counter does move for a request that does reach the model, so the check above can fail.
    ok = post(
        fuzz_target,
        model,
        Body("valid", "application/json", json.dumps(valid_example(model)).encode()),
    )
    assert ok.status_code == 200
    assert inference_requests_total(server.metrics_url, model) > counted
    record("oversize", limit_bytes=limit, sent_bytes=len(body), status=r.status_code)


def test_oversize_burst_does_not_hurt_the_server(fuzz_target):
    """Ten oversize bodies at once: all 413, workers untouched, good requests still answered."""
    server, model = fuzz_target.server, fuzz_target.models[0]
    limit = int(read_properties(ROOT / "config.properties")["max_request_size"])
    key = management_key(fuzz_target)
    before = worker_identity(server.management_url, key, [model])
    headers = server.auth() | {"Content-Type": "application/json"}
    outcomes = burst(f"{server.inference_url}/predictions/{model}", headers, b"x" * (limit * 2), 10)
    assert [o.status for o in outcomes] == [413] * 10
    assert worker_identity(server.management_url, key, [model]) == before


def test_client_text_in_a_refusal_stays_in_the_json_body(fuzz_target):
    """The reason phrase is the status's standard ASCII phrase; the client's text (here a
    non-ASCII Content-Type) is named only in the JSON body, and no worker restarts for it."""
    server = fuzz_target.server
    key = management_key(fuzz_target)
    before = worker_identity(server.management_url, key, fuzz_target.models)
    for model in fuzz_target.models:
        r = requests.post(
            f"{server.inference_url}/predictions/{model}",
            data=b'{"text": "fine", "signal": [0.5]}',
            headers=server.auth() | {"Content-Type": "tëxt/ü".encode()},
            timeout=60,
        )
        assert r.status_code == 415, (model, r.status_code, r.text[:200])
        assert r.reason == "Unsupported Media Type", (model, r.reason)
        body = r.json()
        assert body["kind"] == "unsupported_media_type", body
        assert "ü" in body["error"], body
    assert worker_identity(server.management_url, key, fuzz_target.models) == before
