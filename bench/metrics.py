"""Where a served request's time goes, from TorchServe's own Prometheus counters, read before and
after a load level: queue time and frontend-measured latency per request, and the handler's stage
times per batch (ts_handler_stage_seconds, handlers/telemetry.py) with the batch size formed."""

from __future__ import annotations

import re
import urllib.request

_LINE = re.compile(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')

Samples = dict[tuple[str, frozenset], float]


def parse(text: str) -> Samples:
    """Prometheus text exposition → {(name, frozenset(labels)): value}."""
    out: Samples = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if not m or line.startswith("#"):
            continue
        labels = frozenset(_LABEL.findall(m.group(2) or ""))
        try:
            out[(m.group(1), labels)] = float(m.group(3))
        except ValueError:
            continue
    return out


def scrape(metrics_url: str) -> Samples:
    with urllib.request.urlopen(f"{metrics_url}/metrics", timeout=10) as r:  # noqa: S310 - loopback
        return parse(r.read().decode())


def _total(samples: Samples, name: str, **want: str) -> float:
    return sum(
        v
        for (n, labels), v in samples.items()
        if n == name and all((k, w) in labels for k, w in want.items())
    )


def breakdown(before: Samples, after: Samples, model: str, seconds: float | None = None) -> dict:
    """Per-request and per-batch times (ms) of one model between two scrapes; with the wall
    `seconds` between them, the share of it the workers spent in each handler stage (above 1
    with several workers busy at once)."""

    def delta(name: str, **want: str) -> float:
        return _total(after, name, **want) - _total(before, name, **want)

    requests = delta("ts_inference_requests_total", model_name=model)
    batches = delta("ts_handler_batch_size_count", ModelName=model)
    out = {
        "requests": int(requests),
        "batches": int(batches),
        "mean_batch": round(delta("ts_handler_batch_size_sum", ModelName=model) / batches, 2)
        if batches
        else None,
    }
    # gRPC requests move ts_inference_requests_total but not the two latency counters: no figure
    # is better than a zero.
    if requests and delta("ts_inference_latency_microseconds", model_name=model) > 0:
        out["queue_ms"] = round(
            delta("ts_queue_latency_microseconds", model_name=model) / requests / 1e3, 2
        )
        out["frontend_latency_ms"] = round(
            delta("ts_inference_latency_microseconds", model_name=model) / requests / 1e3, 2
        )
    for stage in ("preprocess", "inference", "postprocess"):
        n = delta("ts_handler_stage_seconds_count", Stage=stage, ModelName=model)
        s = delta("ts_handler_stage_seconds_sum", Stage=stage, ModelName=model)
        out[f"{stage}_ms_per_batch"] = round(s / n * 1e3, 2) if n else None
        if seconds:
            out[f"{stage}_busy_share"] = round(s / seconds, 3)
    return out
