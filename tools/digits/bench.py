"""This model's parts of `python -m bench` (bench/inprocess.py): its bare-runtime feeds. Imports
the runtime stack: only bench loads it."""

from __future__ import annotations

from pathlib import Path

from tools.plugin import Bench


def batches(artifacts: Path, runtime: str, handler: dict, payloads: list[dict], batch: int):
    """The classifier's runtime call and its inputs, `batch` requests at a time: decoded and
    resized into one model batch beforehand, as the handler does."""
    from handlers.digits.predict import DigitsPredictor
    from handlers.kits.image.reading import model_batch
    from handlers.service import Request

    predictor = DigitsPredictor.from_dir(artifacts, handler | {"runtime": runtime})
    export = predictor.settings.export
    requests = [predictor.decode(Request(p)) for p in payloads]
    feeds = []
    for i in range(0, len(requests), batch):
        group = requests[i : i + batch]
        greys = [g for r in group for g in r.images]
        feeds.append(({export.input_name: model_batch(greys, export)}, len(group)))
    return predictor.runtime.run, feeds


BENCH = Bench(batches=batches)
"""This model's `python -m bench` parts (tools/plugin.py)."""
