"""In-process throughput of the bare exported artifact, at the serving batch size and threads.

Requests are turned into model inputs with the handler's own code (tokenizer, windowing) before
the clock starts: only the runtime call is timed, batch by batch, as a worker would run it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]


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

    config = yaml.safe_load((ROOT / "handlers" / model / "model-config.yaml").read_text())
    apply_overrides(config, overrides)
    handler = dict(config.get("handler") or {})
    shape = ServingShape(
        int(config.get("batchSize", 1)), handler.get("threads"), int(config.get("minWorkers", 1))
    )
    return shape, handler


def _sentiment_batches(
    artifacts: Path, runtime: str, handler: dict, payloads: list[dict], batch: int
):
    from handlers.sentiment.predict import SentimentPredictor

    predictor = SentimentPredictor.from_dir(artifacts, handler | {"runtime": runtime})
    ids_name, mask_name = predictor.settings.input_names[:2]
    texts = [p["text"] for p in payloads]
    feeds = []
    for i in range(0, len(texts), batch):
        enc = predictor.encoder.encode(texts[i : i + batch])
        feeds.append(
            ({ids_name: enc.input_ids, mask_name: enc.attention_mask}, len(texts[i : i + batch]))
        )
    return predictor.runtime.run, feeds


def _frequency_batches(
    artifacts: Path, runtime: str, handler: dict, payloads: list[dict], batch: int
):
    from handlers.frequency.codec import decode_request
    from handlers.frequency.engine import FrequencyEngine, model_inputs
    from handlers.frequency.settings import parse_settings
    from handlers.frequency.windowing import split

    manifest = json.loads((artifacts / "manifest.json").read_text())
    settings = parse_settings(manifest, handler | {"runtime": runtime})
    engine = FrequencyEngine(settings, artifacts)
    requests = [decode_request({"body": p}, {}, settings) for p in payloads]
    feeds = []
    for i in range(0, len(requests), batch):
        rows, selectors = [], []
        for req in requests[i : i + batch]:
            win = split(req.signal, settings.window, settings.hop)
            for sel in req.selectors:
                rows.append(win)
                selectors.extend([sel] * win.shape[0])
        x = model_inputs(np.concatenate(rows), selectors, len(settings.frequencies))
        feeds.append(({settings.sequence.inputs[0]: x}, len(requests[i : i + batch])))
    return engine.sequence.run, feeds


PREPARE: dict[str, Callable] = {"sentiment": _sentiment_batches, "frequency": _frequency_batches}


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
        self.run, self.feeds = PREPARE[model](
            artifacts, runtime, handler, payloads, self.shape.batch_size
        )
        # Warm-up over every batch shape: TorchScript's profiling executor re-specialises per
        # shape, ONNX Runtime plans memory per shape; neither belongs to steady-state throughput.
        for feed, _ in self.feeds:
            self.run(feed)

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


def sentiment_stages(
    artifacts: Path,
    runtime: str,
    payloads: list[dict],
    min_seconds: float = 2.0,
    overrides: dict | None = None,
) -> dict:
    """The handler's inference stage taken apart in-process, ms per request at the serving batch:
    tokenization, the runtime call, the MC-dropout head (calibrated probabilities and spread) and
    the JSON of the answers. What the served breakdown cannot see inside a worker."""
    import json as _json

    shape, handler = serving_shape("sentiment", overrides)
    from handlers.sentiment.predict import SentimentPredictor

    p = SentimentPredictor.from_dir(artifacts, handler | {"runtime": runtime})
    ids_name, mask_name = p.settings.input_names[:2]
    texts = [x["text"] for x in payloads]
    batches = [texts[i : i + shape.batch_size] for i in range(0, len(texts), shape.batch_size)]
    answer = p.predict(texts[:1])[0]  # the JSON cost is per answer, whatever its text
    totals = dict.fromkeys(("tokenize", "runtime", "head", "json"), 0.0)
    done, start = 0, time.perf_counter()
    while True:
        for batch in batches:
            t0 = time.perf_counter()
            enc = p.encoder.encode(batch)
            t1 = time.perf_counter()
            out = p.runtime.run({ids_name: enc.input_ids, mask_name: enc.attention_mask})
            t2 = time.perf_counter()
            features = out[p.settings.output_names[1]]
            p.uncertainty(features)
            t3 = time.perf_counter()
            for _ in batch:
                _json.dumps(answer)
            t4 = time.perf_counter()
            for k, dt in zip(totals, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                totals[k] += dt
            done += len(batch)
        if time.perf_counter() - start >= min_seconds:
            break
    return {k: round(v / done * 1e3, 3) for k, v in totals.items()} | {"requests": done}


def handler_throughput(
    artifacts: Path,
    runtime: str,
    payloads: list[dict],
    body: str,
    min_seconds: float = 3.0,
    overrides: dict | None = None,
) -> dict:
    """Frequency only: requests per second of the handler's whole path in this process, from the
    wire bytes a worker receives to the answer bytes it returns (JSON parsing as TorchServe's
    worker does it, decoding, windows, runtime, std band, stitching, encoding): what a served
    request costs inside the worker, without the frontend, the network or the load generator."""
    from bench.served import float32_request
    from handlers.budget import Overloaded
    from handlers.errors import RequestError
    from handlers.frequency.model import FrequencyModel
    from handlers.service import ModelService, Request

    shape, handler = serving_shape("frequency", overrides)
    service = ModelService(
        FrequencyModel.load(
            artifacts, handler | {"runtime": runtime}, state_key=b"bench-only-state-key"
        )
    )
    rows: list[tuple[bytes, dict]] = []
    for p in payloads:
        if body == "float32":
            raw, headers = float32_request(p)
            rows.append((raw, {"body": {"content-type": headers["Content-Type"]}} | headers))
        else:
            rows.append((json.dumps(p).encode(), {"body": {"content-type": "application/json"}}))

    def run(batch: list[tuple[bytes, dict]]) -> None:
        # TorchServe's worker parses application/json bodies itself; the service does the rest,
        # exactly as a worker runs it (parse, budget, model, reply).
        requests = [
            Request(json.loads(raw) if body == "json" else raw, headers) for raw, headers in batch
        ]
        for result in service.handle_batch(requests):
            if isinstance(result, Overloaded):
                refused[0] += 1  # over the batch's work budget, as served: a fast 503
            elif isinstance(result, RequestError):
                raise result

    refused = [0]
    batches = [rows[i : i + shape.batch_size] for i in range(0, len(rows), shape.batch_size)]
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
