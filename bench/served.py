"""Served throughput and latency percentiles through a real TorchServe at a few concurrencies,
with JSON bodies or (a model that takes them) float32 bodies and answers."""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np

from clients import kits
from clients.client import connect
from clients.errors import ClientError, Overloaded
from clients.settings import ClientSettings
from tools import registry

REFUSED = "refused"
"""A call the server refused as overloaded (503 `overloaded`, a full queue, 429): the bounded
queue and budgets doing their work under the level's load, counted apart from errors."""


def tally(outcomes: list) -> dict:
    """Counts of a level's calls: answered, `refused` (overloaded, by design) and `errors`
    (anything else: a 4xx, a 5xx, no answer), plus the answered calls' latencies."""
    answered = [x for x in outcomes if isinstance(x, float)]
    refused = sum(1 for x in outcomes if x == REFUSED)
    return {
        "answered": answered,
        "refused": refused,
        "errors": len(outcomes) - len(answered) - refused,
    }


def _failed(e: ClientError) -> str | None:
    """REFUSED for an overloaded answer, None (an error) for anything else."""
    return REFUSED if isinstance(e, Overloaded) else None


class Probe(Protocol):
    """Whatever is read around the timed calls (CPU, server counters); stop() → fields of the level."""

    def start(self) -> None: ...

    def stop(self, seconds: float) -> dict: ...


def binary_codec(model: str | None = None):
    """The client codec of `model`'s kit (clients/kits/), else of the first registered model
    whose kit's client codec writes float32 bodies."""
    if model is not None:
        return kits.of(model)
    (codec,) = [
        c
        for c in (kits.KITS.get(kit) for m in registry.MODELS for kit in m.kits)
        if hasattr(c, "request_float32")
    ][:1]
    return codec


def float32_request(payload: dict, model: str | None = None) -> tuple[bytes, dict[str, str]]:
    """The float32 form of a JSON payload (the model's client codec): raw body, parameters in
    headers."""
    return binary_codec(model).request_float32(
        payload["signal"], payload.get("frequencies") or None, payload.get("sample_rate")
    )


def served_load(
    settings: ClientSettings,
    model: str,
    payloads: list[dict],
    concurrency: int,
    protocol: str = "rest",
    body: str = "json",
    probe: Probe | None = None,
    codec_model: str | None = None,
) -> dict:
    """Send every payload once with `concurrency` callers (one client each); time each call.
    A float32 answer is decoded (as a client would) inside the timed call. A `probe` is started
    after the warm-up and stopped after the timed calls; what it returns joins the result.
    `codec_model`: the model whose client codec writes and reads float32 bodies (default `model`; a
    no-op stand-in of another model's sizes names that model)."""
    local = threading.local()
    clients = []
    lock = threading.Lock()
    codec = binary_codec(codec_model or model) if body == "float32" else None
    requests = [float32_request(p, codec_model or model) for p in payloads] if codec else payloads

    def client():
        if not hasattr(local, "client"):
            local.client = connect("rest" if body == "float32" else protocol, settings)
            with lock:
                clients.append(local.client)
        return local.client

    def call(request) -> float | str | None:
        t0 = time.perf_counter()
        try:
            if body == "float32":
                r = client().post(model, *request)
                codec.decode_answer(r.content, r.headers)  # type: ignore[union-attr]
            else:
                client().predict(model, request)
        except ClientError as e:
            return _failed(e)
        return (time.perf_counter() - t0) * 1000

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        list(pool.map(call, requests[: concurrency * 2]))  # warm-up: connections, worker caches
        if probe is not None:
            probe.start()
        start = time.perf_counter()
        latencies = list(pool.map(call, requests))
        elapsed = time.perf_counter() - start
        probed = probe.stop(elapsed) if probe is not None else {}
    for c in clients:
        c.close()
    counts = tally(latencies)
    ok = np.array(counts["answered"])
    p50, p95, p99 = np.percentile(ok, [50, 95, 99]) if ok.size else (float("nan"),) * 3
    return probed | {
        "concurrency": concurrency,
        "protocol": "rest" if body == "float32" else protocol,
        "body": body,
        "requests": len(payloads),
        "refused": counts["refused"],
        "errors": counts["errors"],
        "seconds": elapsed,
        "rps": ok.size / elapsed,
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "mean_ms": float(ok.mean()) if ok.size else float("nan"),
    }


def paced_load(
    settings: ClientSettings,
    model: str,
    payloads: list[dict],
    rate: float,
    protocol: str = "rest",
    workers: int = 32,
) -> dict:
    """Open-loop load: request i is due at i / rate seconds, whatever the earlier ones did, and its
    latency counts from when it was due, so a stalled server cannot hide its queue (no coordinated
    omission). `workers` callers carry the requests; too few would show up as `late` starts."""
    local = threading.local()
    clients, lock = [], threading.Lock()

    def client():
        if not hasattr(local, "client"):
            local.client = connect(protocol, settings)
            with lock:
                clients.append(local.client)
        return local.client

    def warm(payload: dict) -> None:
        with contextlib.suppress(ClientError):
            client().predict(model, payload)

    start = 0.0

    def call(i: int) -> tuple[float | str | None, float]:
        due = start + i / rate
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        late = time.perf_counter() - due
        try:
            client().predict(model, payloads[i])
        except ClientError as e:
            return _failed(e), late
        return (time.perf_counter() - due) * 1000, late

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(warm, payloads[:workers]))
        start = time.perf_counter() + 0.05
        got = list(pool.map(call, range(len(payloads))))
        elapsed = time.perf_counter() - start
    for c in clients:
        c.close()
    counts = tally([x for x, _ in got])
    ok = np.array(counts["answered"])
    p50, p95, p99 = np.percentile(ok, [50, 95, 99]) if ok.size else (float("nan"),) * 3
    return {
        "rate": rate,
        "protocol": protocol,
        "requests": len(payloads),
        "refused": counts["refused"],
        "errors": counts["errors"],
        "seconds": elapsed,
        "rps": ok.size / elapsed,
        "p50_ms": float(p50),
        "p95_ms": float(p95),
        "p99_ms": float(p99),
        "p99_over_p50": float(p99 / p50) if ok.size else None,
        "max_start_late_ms": max(late for _, late in got) * 1000,
    }
