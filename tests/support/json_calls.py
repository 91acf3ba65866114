"""Counting the JSON work a path does: every json / orjson dumps and loads call while the block
runs, wherever the module was imported (the typed OIP and scoring paths must do none)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import orjson
import pytest


@contextmanager
def json_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter]:
    """A Counter of "json.dumps", "json.loads", "orjson.dumps", "orjson.loads" calls in the block."""
    calls: Counter = Counter()
    with monkeypatch.context() as patch:
        for module, name in ((json, "json"), (orjson, "orjson")):
            for fn in ("dumps", "loads"):
                real = getattr(module, fn)

                def counted(*args, _real=real, _key=f"{name}.{fn}", **kwargs):
                    calls[_key] += 1
                    return _real(*args, **kwargs)

                patch.setattr(module, fn, counted)
        yield calls
