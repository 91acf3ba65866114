"""Where the served time goes: the handler's stage histograms (ts_handler_stage_seconds) and the
frontend's queue and inference latency counters, read from TorchServe's Prometheus endpoint
before and after one load level and differenced."""

from __future__ import annotations

import re

import requests

_LINE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)\{(?P<labels>[^}]*)\}\s+(?P<value>\S+)$")
_LABEL = re.compile(r'(\w+)="([^"]*)"')
STAGE = "ts_handler_stage_seconds"
FRONTEND = {
    "queue": "ts_queue_latency_microseconds",
    "frontend_inference": "ts_inference_latency_microseconds",
}


def scrape(metrics_url: str) -> dict[tuple[str, str, str], float]:
    return parse_metrics(requests.get(f"{metrics_url}/metrics", timeout=10).text)


def parse_metrics(text: str) -> dict[tuple[str, str, str], float]:
    """{(metric, model, stage or ""): value} for the series the breakdown uses."""
    out: dict[tuple[str, str, str], float] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        name = m["name"]
        if name in (f"{STAGE}_sum", f"{STAGE}_count"):
            key = (name, labels.get("ModelName", ""), labels.get("Stage", ""))
        elif name in FRONTEND.values():
            key = (name, labels.get("model_name", ""), "")
        else:
            continue
        out[key] = out.get(key, 0.0) + float(m["value"])
    return out


def breakdown(before: dict, after: dict, model: str, seconds: float, requests_: int) -> dict:
    """Per stage: batches, ms per batch, ms per request and the share of the wall time a worker
    spent in it (over 1 with several workers); the frontend's queue and inference ms per request."""

    def delta(key) -> float:
        return after.get(key, 0.0) - before.get(key, 0.0)

    stages = {}
    for stage in ("preprocess", "inference", "postprocess"):
        total = delta((f"{STAGE}_sum", model, stage))
        batches = delta((f"{STAGE}_count", model, stage))
        stages[stage] = {
            "batches": int(batches),
            "ms_per_batch": 1000 * total / batches if batches else None,
            "ms_per_request": 1000 * total / requests_ if requests_ else None,
            "busy_share": total / seconds if seconds else None,
        }
    for label, name in FRONTEND.items():
        total_us = delta((name, model, ""))
        stages[label] = {"ms_per_request": total_us / 1000 / requests_ if requests_ else None}
    return stages
