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
    from handlers.frequency.engine import FrequencyEngine
    from handlers.frequency.lockin import reverse_rows, window_inputs
    from handlers.frequency.settings import parse_settings
    from handlers.kits.signal.codec import decode_request
    from handlers.kits.signal.windowing import split
    from handlers.service import Request

    manifest = json.loads((artifacts / "manifest.json").read_text())
    settings = parse_settings(manifest, handler | {"runtime": runtime})
    engine = FrequencyEngine(settings, artifacts)
    requests = [decode_request(Request(p), settings) for p in payloads]
    feeds = []
    for i in range(0, len(requests), batch):
        rows, lengths, selectors = [], [], []
        for req in requests[i : i + batch]:
            n = req.signal.shape[0]
            win = split(req.signal.astype(np.float64), settings.window, settings.hop)
            lens = np.minimum(settings.window, n - np.arange(win.shape[0]) * settings.hop)
            for sel in req.selectors:
                rows.append(win)
                lengths.append(lens)
                selectors.extend([sel] * win.shape[0])
        # Each window forward and backward, as the engine reads it (lockin.read_windows).
        win, lens = np.concatenate(rows), np.concatenate(lengths)
        both = np.concatenate([win, reverse_rows(win, lens)])
        x, _, _, _ = window_inputs(both, np.concatenate([lens, lens]), selectors + selectors,
                                   settings.frequencies, settings.sample_rate, settings.block)  # fmt: skip
        feeds.append(({settings.sequence.inputs[0]: x}, len(requests[i : i + batch])))
    return engine.sequence.run, feeds


def load(artifacts: Path, config: dict):
    """The served model for the handler-path timing: stream states signed with a throwaway key
    (no deployment key file on a bench machine)."""
    from handlers.frequency.model import FrequencyModel

    return FrequencyModel.load(artifacts, config, state_key=b"bench-only-state-key")


BENCH = Bench(batches=batches, load=load)
"""This model's `python -m bench` parts (tools/plugin.py)."""
