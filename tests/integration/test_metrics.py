"""Handler metrics and refused-request logs on a real TorchServe: after known traffic, the Prometheus
scrape moves by exactly what that traffic implies, and the Grafana dashboard only queries metrics the
server exposes. Deltas against the shared `served` server, so other suites' traffic does not matter.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import requests
import yaml

from handlers import telemetry
from handlers.frequency.settings import FrequencySettings, parse_settings
from handlers.kits.signal.windowing import num_windows

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MARKER = "BODY-MARKER-7f3a"
"""In every refused body: it must never reach a log."""

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass
class Scrape:
    samples: list[tuple[str, dict[str, str], float]]

    @classmethod
    def get(cls, url: str) -> Scrape:
        text = requests.get(f"{url}/metrics", timeout=10).text
        samples = []
        for line in text.splitlines():
            m = _SAMPLE.match(line)
            if m and not line.startswith("#"):
                samples.append(
                    (m.group(1), dict(_LABEL.findall(m.group(2) or "")), float(m.group(3)))
                )
        return cls(samples)

    @property
    def names(self) -> set[str]:
        return {name for name, _, _ in self.samples}

    def total(self, name: str, **labels: str) -> float:
        return sum(
            v
            for n, lab, v in self.samples
            if n == name and all(lab.get(k) == x for k, x in labels.items())
        )

    def labels(self, name: str, label: str, **labels: str) -> set[str]:
        return {
            lab[label]
            for n, lab, _ in self.samples
            if n == name and label in lab and all(lab.get(k) == x for k, x in labels.items())
        }


@dataclass
class Traffic:
    before: Scrape
    after: Scrape = None
    answers: dict[str, list[requests.Response]] = field(default_factory=dict)
    windows: list[int] = field(default_factory=list)

    def delta(self, name: str, **labels: str) -> float:
        return self.after.total(name, **labels) - self.before.total(name, **labels)

    def good(self, model: str) -> list[dict]:
        """Every prediction the model answered (a {"texts": [...]} request gives several)."""
        out = []
        for r in self.answers[model]:
            if r.status_code == 200:
                body = r.json()
                out += body if isinstance(body, list) else [body]
        return out

    def refused(self, model: str) -> list[requests.Response]:
        return [r for r in self.answers[model] if 400 <= r.status_code < 500]


def sentiment_bodies() -> list[tuple[bytes, str]]:
    long = " ".join(f"word{i % 50}" for i in range(1200))  # far past any max_length, under 8 KiB
    good = [
        {"text": "A wonderful film, I loved every minute."},
        {"text": "Dull, predictable and far too long."},
        {"text": "It was fine."},
        {"texts": ["Great acting.", "Terrible script."]},
        {"text": long},
        {"text": "Starts slow. " + long},
    ]
    bad = [
        (json.dumps({"txt": MARKER}).encode(), "application/json"),  # bad_field
        (json.dumps({"text": "   "}).encode(), "application/json"),  # empty_input
        (b"\xff\xfe" + MARKER.encode(), "text/plain"),  # bad_encoding
        (json.dumps({"text": MARKER * 1000}).encode(), "application/json"),  # too_large
    ]
    return [(json.dumps(b).encode(), "application/json") for b in good] + bad


def frequency_bodies(settings: FrequencySettings) -> tuple[list[tuple[bytes, str]], list[int]]:
    rng = np.random.default_rng(0)
    short, long = settings.window, settings.window * 3 + 7
    good = [
        {
            "signal": rng.normal(size=short).round(4).tolist(),
            "frequencies": [settings.frequencies[0]],
        },
        {"signal": rng.normal(size=long).round(4).tolist()},  # every served frequency
    ]
    bad = [
        {"signal": [], "note": MARKER},  # empty_input
        {"signal": [0.5] * 8, "frequencies": [12345.0], "note": MARKER},  # bad_field
    ]
    bodies = [(json.dumps(b).encode(), "application/json") for b in good + bad]
    return bodies, [num_windows(n, settings.window, settings.hop) for n in (short, long)]


def post_all(served, model: str, bodies: list[tuple[bytes, str]]) -> list[requests.Response]:
    def post(body):
        data, ctype = body
        return served.post(f"/predictions/{model}", data=data, headers={"Content-Type": ctype})

    # Concurrent, so TorchServe forms real batches (and batch size is more than a constant 1).
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(post, bodies))


def frequency_settings(served) -> FrequencySettings:
    manifest = json.loads((served.artifacts["frequency"] / "manifest.json").read_text())
    config = yaml.safe_load((ROOT / "handlers" / "frequency" / "model-config.yaml").read_text())
    return parse_settings(manifest, config.get("handler"))


@pytest.fixture(scope="module")
def traffic(served) -> Traffic:
    assert {"sentiment", "frequency"} <= set(served.models)
    t = Traffic(before=Scrape.get(served.metrics_url))
    t.answers["sentiment"] = post_all(served, "sentiment", sentiment_bodies())
    bodies, t.windows = frequency_bodies(frequency_settings(served))
    t.answers["frequency"] = post_all(served, "frequency", bodies)
    # The worker's metric lines reach the frontend through its stdout, after the response: wait
    # until the last thing each batch reports (its postprocess time) has arrived for every batch.
    deadline = time.monotonic() + 20
    while True:
        t.after = Scrape.get(served.metrics_url)
        settled = all(
            t.delta(telemetry.BATCH_SIZE + "_sum", ModelName=m) == len(t.answers[m])
            and t.delta(telemetry.STAGE_SECONDS + "_count", ModelName=m, Stage="postprocess")
            == t.delta(telemetry.BATCH_SIZE + "_count", ModelName=m)
            for m in t.answers
        )
        if settled or time.monotonic() > deadline:
            return t
        time.sleep(0.25)


@pytest.mark.parametrize("model", ["sentiment", "frequency"])
def test_batch_sizes_add_up_to_the_requests_sent_and_every_stage_is_timed_per_batch(traffic, model):
    sent = len(traffic.answers[model])
    assert traffic.delta("ts_inference_requests_total", model_name=model) == sent
    assert traffic.delta(telemetry.BATCH_SIZE + "_sum", ModelName=model) == sent
    batches = traffic.delta(telemetry.BATCH_SIZE + "_count", ModelName=model)
    assert 1 <= batches <= sent
    for stage in telemetry.STAGES:
        count = traffic.delta(telemetry.STAGE_SECONDS + "_count", ModelName=model, Stage=stage)
        seconds = traffic.delta(telemetry.STAGE_SECONDS + "_sum", ModelName=model, Stage=stage)
        assert count == batches, stage
        assert 0 < seconds < 60, stage


def test_refused_requests_are_counted_by_reason(traffic):
    expected = {
        "sentiment": {"bad_field": 1, "empty_input": 1, "bad_encoding": 1, "too_large": 1},
        "frequency": {"empty_input": 1, "bad_field": 1},
    }
    for model, reasons in expected.items():
        answered = Counter(r.json()["kind"] for r in traffic.refused(model))
        assert answered == reasons, model  # the traffic is what the test thinks it is
        for reason, n in reasons.items():
            assert traffic.delta(telemetry.REFUSED, ModelName=model, Reason=reason) == n
        assert traffic.delta(telemetry.REFUSED, ModelName=model) == sum(reasons.values())


def test_sentiment_predictions_truncation_and_uncertainty_match_the_answers(traffic):
    good = traffic.good("sentiment")
    assert len(good) == 7  # five single texts and one {"texts": [two]}
    for label, n in Counter(p["label"] for p in good).items():
        assert traffic.delta(telemetry.PREDICTIONS, ModelName="sentiment", Label=label) == n
    assert traffic.delta(telemetry.PREDICTIONS, ModelName="sentiment") == 7

    truncated = sum(p["truncated"] for p in good)
    assert truncated >= 2  # the two long texts
    assert traffic.delta(telemetry.TRUNCATED, ModelName="sentiment") == truncated

    for measure in ("entropy", "mutual_information", "std"):
        hist = telemetry.UNCERTAINTY
        labels = {"ModelName": "sentiment", "Measure": measure}
        assert traffic.delta(hist + "_count", **labels) == len(good), measure
        answered = sum(p["uncertainty"][measure] for p in good)
        assert traffic.delta(hist + "_sum", **labels) == pytest.approx(answered, abs=1e-6)
        assert traffic.delta(hist + "_bucket", le="+Inf", **labels) == len(good)


def test_frequency_windows_components_and_std_match_the_answers(traffic):
    good = traffic.good("frequency")
    components = [c for body in good for c in body["components"]]
    assert len(good) == 2 and len(components) >= 2
    for freq, n in Counter(c["frequency"] for c in components).items():
        assert traffic.delta(telemetry.PREDICTIONS, ModelName="frequency", Label=f"{freq:g}Hz") == n

    hist = telemetry.UNCERTAINTY
    labels = {"ModelName": "frequency", "Measure": "std"}
    assert traffic.delta(hist + "_count", **labels) == len(components)
    mean_std = sum(float(np.mean(c["std"])) for c in components)
    assert traffic.delta(hist + "_sum", **labels) == pytest.approx(mean_std, rel=1e-4, abs=1e-6)

    assert traffic.windows[1] > traffic.windows[0] == 1
    assert traffic.delta(telemetry.WINDOWS + "_count", ModelName="frequency") == 2
    assert traffic.delta(telemetry.WINDOWS + "_sum", ModelName="frequency") == sum(traffic.windows)


def test_each_refused_request_logs_one_json_line_without_its_body(served, traffic):
    refused = {
        r.headers["x-request-id"]: (model, r.json()["kind"])
        for model in traffic.answers
        for r in traffic.refused(model)
    }
    deadline = time.monotonic() + 10
    while True:
        log = served.logs()
        records = [
            json.loads(line[line.index("{") :])
            for line in log.splitlines()
            if '"event": "request_refused"' in line
        ]
        mine = [r for r in records if r["request_id"] in refused]
        if len(mine) >= len(refused) or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert sorted(r["request_id"] for r in mine) == sorted(refused)  # exactly one line each
    for r in mine:
        assert (r["model"], r["reason"]) == refused[r["request_id"]]
        assert r["status"] == 400
    assert MARKER not in log


def test_every_custom_metric_is_in_the_scrape(traffic):
    missing = {
        name + ("_count" if spec.type == "histogram" else "")
        for name, spec in telemetry.METRICS.items()
    } - traffic.after.names
    assert not missing


def test_dashboard_queries_only_metrics_the_server_exposes(traffic):
    dashboard = json.loads((ROOT / "dashboards" / "torchserve.json").read_text())
    exprs = [
        t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t
    ] + [v["definition"] for v in dashboard["templating"]["list"] if "definition" in v]
    queried = set()
    for expr in exprs:
        queried |= set(re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", expr))
        queried |= set(re.findall(r"label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)", expr))
    assert len(queried) >= 12
    assert queried <= traffic.after.names, queried - traffic.after.names
    # The model variable must offer both served models.
    assert {"sentiment", "frequency"} <= traffic.after.labels(
        telemetry.BATCH_SIZE + "_count", "ModelName"
    )
