"""In-process throughput of the bare exported artifact, at the serving batch size and threads.

Requests are turned into model inputs with the handler's own code before the clock starts (each
model's `batches` hook in tools/<model>/bench.py, found through the registry): only the runtime
call is timed, batch by batch, as a worker would run it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from tools import registry
from tools.plugin import Bench


@dataclass(frozen=True)
class ServingShape:
    batch_size: int
    """TorchServe batchSize of the model-config: requests per runtime call."""
    threads: int | None
    """The handler's runtime intra-op threads."""
    workers: int = 1
    """TorchServe minWorkers of the model-config."""


def serving_shape(model: str, overrides: dict | None = None) -> tuple[ServingShape, dict]:
    from deploy.archive import apply_overrides

    config = yaml.safe_load(registry.get(model).model_config.read_text())
    apply_overrides(config, overrides)
    handler = dict(config.get("handler") or {})
    shape = ServingShape(
        int(config.get("batchSize", 1)), handler.get("threads"), int(config.get("minWorkers", 1))
    )
    return shape, handler


def bench_parts(model: str) -> Bench | None:
    """The model's `BENCH` (tools/<model>/bench.py, tools/plugin.Bench), or None: without it the
    model has no in-process figure and bench skips it. `batches` (the bare runtime call and its
    feeds), `stages` (its inference stage taken apart), `load` (the served model the handler-path
    timing runs; default: its registry `MODEL.load`)."""
    return registry.get(model).bench()


class InProcess:
    """The bare runtime over `payloads` in serving-size batches, ready to be timed again and again:
    the bench times it next to every served level, so both see the same neighbours on shared cores."""

    def __init__(
        self,
        model: str,
        artifacts: Path,
        runtime: str,
        payloads: list[dict],
        overrides: dict | None = None,
    ):
        self.shape, handler = serving_shape(model, overrides)
        parts = bench_parts(model)
        if parts is None:
            raise LookupError(f"tools/{model}/bench.py declares no BENCH: no bare-model figure")
        self.run, self.feeds = parts.batches(
            artifacts, runtime, handler, payloads, self.shape.batch_size
        )
        # Warm-up over every batch shape: TorchScript's profiling executor re-specialises per
        # shape, ONNX Runtime plans memory per shape; neither belongs to steady-state throughput.
        for feed, _ in self.feeds:
            self.run(feed)
        self._prepare = lambda batch: parts.batches(artifacts, runtime, handler, payloads, batch)
        self._lone: list | None = None

    def lone_latency(self, min_seconds: float = 2.0) -> dict:
        """The bare model's latency for one request alone (a batch of one), median and p95 in ms:
        what a lone client could get at best, the figure its served p50 is held against."""
        if self._lone is None:
            self._lone = self._prepare(1)[1]
            for feed, _ in self._lone:  # warm-up: batch-1 shapes are new to the runtime
                self.run(feed)
        times: list[float] = []
        start = time.perf_counter()
        while time.perf_counter() - start < min_seconds or len(times) < 8:
            for feed, _ in self._lone:
                t = time.perf_counter()
                self.run(feed)
                times.append(time.perf_counter() - t)
        ms = np.array(times) * 1e3
        return {
            "p50_ms": float(np.percentile(ms, 50)),
            "p95_ms": float(np.percentile(ms, 95)),
            "calls": len(times),
        }

    def time(self, min_seconds: float = 3.0) -> dict:
        """Requests per second; the whole set is repeated until min_seconds have passed."""
        done, start = 0, time.perf_counter()
        while True:
            for feed, n in self.feeds:
                self.run(feed)
                done += n
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        return {
            "batch_size": self.shape.batch_size,
            "threads": self.shape.threads,
            "requests": done,
            "seconds": elapsed,
            "rps": done / elapsed,
        }


def _serve_timings(conn, start, args: tuple) -> None:
    """One bare-model process of `Replicas`: load, warm up, then time on request, all starting at
    the same barrier, until told to stop."""
    bare = InProcess(*args)
    conn.send("ready")
    while (min_seconds := conn.recv()) is not None:
        start.wait()
        conn.send(bare.time(min_seconds))


class Replicas:
    """`processes` copies of the bare model timed side by side, each in its own process: what
    TorchServe runs with minWorkers > 1 (one process per worker, each with the handler's threads).
    Their throughputs add up; a ratio served/in-process is only fair against the same shape."""

    def __init__(self, processes: int, *args):
        import multiprocessing as mp

        ctx = mp.get_context("spawn")  # a fresh interpreter, no forked runtime thread pools
        self.start = ctx.Barrier(processes)
        self.conns, self.procs = [], []
        for _ in range(processes):
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_serve_timings, args=(child, self.start, args), daemon=True)
            proc.start()
            self.conns.append(parent)
            self.procs.append(proc)
        for conn in self.conns:
            if conn.recv() != "ready":
                raise RuntimeError("a bare-model process failed to load")

    def time(self, min_seconds: float = 3.0) -> dict:
        for conn in self.conns:
            conn.send(min_seconds)
        each = [conn.recv() for conn in self.conns]
        return each[0] | {
            "processes": len(each),
            "requests": sum(r["requests"] for r in each),
            "seconds": max(r["seconds"] for r in each),
            "rps": sum(r["rps"] for r in each),
            "rps_each": [r["rps"] for r in each],
        }

    def close(self) -> None:
        for conn in self.conns:
            conn.send(None)
        for proc in self.procs:
            proc.join(timeout=10)


def in_process_throughput(
    model: str,
    artifacts: Path,
    runtime: str,
    payloads: list[dict],
    min_seconds: float = 3.0,
    overrides: dict | None = None,
) -> dict:
    """Requests per second of the bare runtime over `payloads`, in serving-size batches."""
    return InProcess(model, artifacts, runtime, payloads, overrides).time(min_seconds)


def stage_times(
    model: str,
    artifacts: Path,
    runtime: str,
    payloads: list[dict],
    min_seconds: float = 2.0,
    overrides: dict | None = None,
) -> dict | None:
    """The model's inference stage taken apart in-process at the serving batch, ms per request
    (its bench.py `stages` hook): what the served breakdown cannot see inside a worker. None
    where the model has no such hook."""
    parts = bench_parts(model)
    hook = parts.stages if parts is not None else None
    if hook is None:
        return None
    shape, handler = serving_shape(model, overrides)
    return hook(artifacts, runtime, handler, payloads, shape.batch_size, min_seconds)


def handler_path(
    model: str,
    artifacts: Path,
    runtime: str,
    payloads: list[dict],
    body: str,
    overrides: dict | None = None,
):
    """The model's whole handler path in this process, ready to be timed: (run, batches,
    refused). `run(batch)` hands a batch of wire bodies to the model's `ModelService` as a worker
    does (the worker hands bodies over as bytes, config.properties' decode_input_request=false)
    and raises a request's client error; `batches` are `payloads` as `body` bodies in serving-size
    batches; `refused[0]` counts the requests refused over the batch's work budget (a fast 503, as
    served). The model is its bench.py `load` hook's, else its registry `MODEL.load`."""
    from bench.served import float32_request
    from handlers.budget import Overloaded
    from handlers.errors import RequestError
    from handlers.service import ModelService, Request

    shape, handler = serving_shape(model, overrides)
    parts = bench_parts(model)
    load = (parts.load if parts is not None else None) or registry.get(model).spec().model.load
    service = ModelService(load(artifacts, handler | {"runtime": runtime}))
    rows: list[tuple[bytes, dict]] = []
    for p in payloads:
        if body == "float32":
            raw, headers = float32_request(p)
            rows.append((raw, headers))
        else:
            rows.append((json.dumps(p).encode(), {"Content-Type": "application/json"}))
    refused = [0]

    def run(batch: list[tuple[bytes, dict]]) -> None:
        requests = [Request(raw, headers) for raw, headers in batch]
        for result in service.handle_batch(requests):
            if isinstance(result, Overloaded):
                refused[0] += 1
            elif isinstance(result, RequestError):
                raise result

    batches = [rows[i : i + shape.batch_size] for i in range(0, len(rows), shape.batch_size)]
    return run, batches, refused


def handler_throughput(
    model: str,
    artifacts: Path,
    runtime: str,
    payloads: list[dict],
    body: str,
    min_seconds: float = 3.0,
    overrides: dict | None = None,
) -> dict:
    """Requests per second of the model's whole handler path in this process (`handler_path`),
    from the wire bytes a worker receives to the answer bytes it returns (the model's parse,
    inference and reply): what a served request costs inside the worker, without the frontend,
    the network or the load generator."""
    run, batches, refused = handler_path(model, artifacts, runtime, payloads, body, overrides)
    for b in batches:  # warm-up, as for the bare model
        run(b)
    refused[0] = 0
    done, start = 0, time.perf_counter()
    while True:
        for b in batches:
            run(b)
            done += len(b)
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            break
    return {
        "body": body,
        "requests": done,
        "seconds": elapsed,
        "rps": done / elapsed,
        "refused_over_budget": refused[0],
    }
