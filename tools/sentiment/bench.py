"""This model's parts of `python -m bench` (bench/inprocess.py): its bare-runtime feeds and its
inference stage taken apart. Imports the runtime stack: only bench loads it."""

from __future__ import annotations

import json
import time
from pathlib import Path

from tools.plugin import Bench


def _predictor(artifacts: Path, runtime: str, handler: dict):
    from handlers.sentiment.predict import SentimentPredictor

    return SentimentPredictor.from_dir(artifacts, handler | {"runtime": runtime})


def _runtime_feeds(predictor, texts: list[str]) -> list[dict]:
    """The runtime calls the predictor makes for `texts` (its `encoded_calls`)."""
    return [predictor.feed(batch) for batch in predictor.encoded_calls(texts)]


def batches(artifacts: Path, runtime: str, handler: dict, payloads: list[dict], batch: int):
    """The bare runtime calls and their inputs, `batch` texts at a time, tokenized beforehand: one
    padded call per batch, or one call per text where the predictor runs texts alone."""
    predictor = _predictor(artifacts, runtime, handler)
    texts = [p["text"] for p in payloads]
    feeds = [
        (_runtime_feeds(predictor, texts[i : i + batch]), len(texts[i : i + batch]))
        for i in range(0, len(texts), batch)
    ]

    def run(calls: list[dict]) -> None:
        for feed in calls:
            predictor.runtime.run(feed)

    return run, feeds


def stages(
    artifacts: Path,
    runtime: str,
    handler: dict,
    payloads: list[dict],
    batch: int,
    min_seconds: float = 2.0,
) -> dict:
    """The handler's inference stage taken apart in-process, ms per request at the serving batch:
    tokenization, the runtime call, the MC-dropout head (calibrated probabilities and spread) and
    the JSON of the answers. What the served breakdown cannot see inside a worker."""
    import numpy as np

    p = _predictor(artifacts, runtime, handler)
    texts = [x["text"] for x in payloads]
    groups = [texts[i : i + batch] for i in range(0, len(texts), batch)]
    answer = p.predict(texts[:1])[0]  # the JSON cost is per answer, whatever its text
    totals = dict.fromkeys(("tokenize", "runtime", "head", "json"), 0.0)
    done, start = 0, time.perf_counter()
    while True:
        for group in groups:
            t0 = time.perf_counter()
            calls = _runtime_feeds(p, group)
            t1 = time.perf_counter()
            outs = [p.runtime.run(feed) for feed in calls]
            t2 = time.perf_counter()
            features = np.concatenate([out[p.settings.export.output_names[1]] for out in outs])
            p.uncertainty(features)
            t3 = time.perf_counter()
            for _ in group:
                json.dumps(answer)
            t4 = time.perf_counter()
            for k, dt in zip(totals, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                totals[k] += dt
            done += len(group)
        if time.perf_counter() - start >= min_seconds:
            break
    return {k: round(v / done * 1e3, 3) for k, v in totals.items()} | {"requests": done}


BENCH = Bench(batches=batches, stages=stages)
"""This model's `python -m bench` parts (tools/plugin.py)."""
