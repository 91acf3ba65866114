"""Queue time against latency under stepped load: the figures behind the autoscaling threshold.

Each step runs Locust with N users sending back to back through the balancer for a fixed time, and
reads TorchServe's own counters from every replica before and after (the metrics the KEDA query
uses), so the step's mean queue wait is exactly what the ScaledObject would see.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import requests

from rehearsal.pod import Pod

COUNTERS = ("ts_queue_latency_microseconds", "ts_inference_requests_total")


def scrape(pod: Pod) -> dict[str, float]:
    text = requests.get(f"http://127.0.0.1:{pod.ports['metrics']}/metrics", timeout=10).text
    totals = dict.fromkeys(COUNTERS, 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in totals:
            totals[name] += float(line.rsplit(" ", 1)[1])
    return totals


def summarise(log: Path, seconds: float) -> dict:
    entries = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    latencies = sorted((e["end"] - e["start"]) * 1000 for e in entries if e["ok"])
    pick = lambda q: round(latencies[min(len(latencies) - 1, int(len(latencies) * q))], 1)  # noqa: E731
    return {
        "requests": len(entries),
        "failed": sum(not e["ok"] for e in entries),
        "rps": round(len(latencies) / seconds, 1),
        "p50_ms": pick(0.5) if latencies else None,
        "p95_ms": pick(0.95) if latencies else None,
    }


def load_steps(pods: dict[str, Pod], run_locust, work: Path, steps: list[int], seconds: float):
    """run_locust(users, pacing_s, log, run_time_s) -> Popen; returns one dict per step."""
    out = []
    for users in steps:
        before = [scrape(p) for p in pods.values()]
        log = work / f"queueing-{users}.jsonl"
        proc: subprocess.Popen = run_locust(users, 0.0, log, seconds)
        proc.wait(timeout=seconds + 60)
        after = [scrape(p) for p in pods.values()]
        waited = sum(a[COUNTERS[0]] - b[COUNTERS[0]] for a, b in zip(after, before, strict=True))
        served = sum(a[COUNTERS[1]] - b[COUNTERS[1]] for a, b in zip(after, before, strict=True))
        step = {"users": users} | summarise(log, seconds)
        step["mean_queue_ms"] = round(waited / served / 1000, 1) if served else None
        out.append(step)
    return out
