"""Served throughput and latency percentiles through a real TorchServe at a few concurrencies."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from clients.client import connect
from clients.errors import ClientError
from clients.settings import ClientSettings


def served_load(
    settings: ClientSettings,
    model: str,
    payloads: list[dict],
    concurrency: int,
    protocol: str = "rest",
) -> dict:
    """Send every payload once with `concurrency` callers (one client each); time each call."""
    local = threading.local()
    clients = []
    lock = threading.Lock()

    def client():
        if not hasattr(local, "client"):
            local.client = connect(protocol, settings)
            with lock:
                clients.append(local.client)
        return local.client

    def call(payload: dict) -> float | None:
        t0 = time.perf_counter()
        try:
            client().predict(model, payload)
        except ClientError:
            return None
        return (time.perf_counter() - t0) * 1000

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(call, payloads[: concurrency * 2]))  # warm-up: connections, worker caches
        start = time.perf_counter()
        latencies = list(pool.map(call, payloads))
        elapsed = time.perf_counter() - start
    for c in clients:
        c.close()
    ok = np.array([x for x in latencies if x is not None])
    p50, p95, p99 = np.percentile(ok, [50, 95, 99]) if ok.size else (float("nan"),) * 3
    return {
        "concurrency": concurrency,
        "protocol": protocol,
        "requests": len(payloads),
        "errors": len(latencies) - int(ok.size),
        "seconds": elapsed,
        "rps": ok.size / elapsed,
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
    }
