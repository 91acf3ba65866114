"""This model's parts of `python -m bench` (bench/inprocess.py): its bare-runtime feeds. Imports
the runtime stack: only bench loads it."""

from __future__ import annotations

from pathlib import Path

from tools.plugin import Bench


def batches(artifacts: Path, runtime: str, handler: dict, payloads: list[dict], batch: int):
    """The graph's runtime call and its inputs, `batch` requests at a time, read and encoded
    beforehand by the tabular kit as the handler does."""
    from handlers.service import Request
    from handlers.tabular.model import TabularModel

    model = TabularModel.load(artifacts, handler | {"runtime": runtime})
    requests = [model.parse(Request(p)) for p in payloads]
    feeds = []
    for i in range(0, len(requests), batch):
        rows = [row for r in requests[i : i + batch] for row in r.rows]
        feeds.append(
            ({model.export.input_name: model.schema.encode(rows)}, len(requests[i : i + batch]))
        )
    return model.runtime.run, feeds


BENCH = Bench(batches=batches)
"""This model's `python -m bench` parts (tools/plugin.py)."""
