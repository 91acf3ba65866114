"""This model's parts of `python -m bench` (bench/inprocess.py): its bare-runtime feeds and the
model its handler-path timing serves. Imports the runtime stack: only bench loads it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tools.plugin import Bench


def batches(artifacts: Path, runtime: str, handler: dict, payloads: list[dict], batch: int):
    """The sequence model's runtime call and its inputs, `batch` requests at a time: decoded,
    windowed and turned into model rows beforehand, as the handler does."""
    from handlers.frequency.codec import decode_request
    from handlers.frequency.engine import FrequencyEngine, model_inputs
    from handlers.frequency.settings import parse_settings
    from handlers.frequency.windowing import split
    from handlers.service import Request

    manifest = json.loads((artifacts / "manifest.json").read_text())
    settings = parse_settings(manifest, handler | {"runtime": runtime})
    engine = FrequencyEngine(settings, artifacts)
    requests = [decode_request(Request(p), settings) for p in payloads]
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


def load(artifacts: Path, config: dict):
    """The served model for the handler-path timing: stream states signed with a throwaway key
    (no deployment key file on a bench machine)."""
    from handlers.frequency.model import FrequencyModel

    return FrequencyModel.load(artifacts, config, state_key=b"bench-only-state-key")


BENCH = Bench(batches=batches, load=load)
"""This model's `python -m bench` parts (tools/plugin.py)."""
