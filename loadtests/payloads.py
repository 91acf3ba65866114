"""Realistic request bodies for every registered model: each model's `payloads` hook
(tools/<model>/samples.py, tools/registry.py) draws them, deterministically per seed."""

from __future__ import annotations

import random
from collections.abc import Callable

from tools import registry


class Payloads:
    """Deterministic stream of request bodies for each served model; `options` go to every
    model's hook (each reads the ones it knows)."""

    def __init__(self, seed: int = 0, **options):
        self.seed = seed
        self.rng = random.Random(seed)
        self.options = options
        self._draw: dict[str, Callable[[], dict]] = {}

    def for_model(self, model: str) -> dict:
        """A body for `model`; a served variant (`<model>_onnx`) gets its family's bodies."""
        spec = registry.get(model)
        if spec.name not in self._draw:
            hook = spec.samples().payloads
            if hook is None:
                example = spec.example()
                self._draw[spec.name] = lambda: dict(example)
            else:
                self._draw[spec.name] = hook(self.seed, **self.options)
        return self._draw[spec.name]()


def bench_feed(model: str, n: int, **options) -> list[dict]:
    """`n` bodies of one fixed shape (the model's `bench_feed` hook, else its load payloads)."""
    spec = registry.get(model)
    hook = spec.samples().bench_feed
    if hook is not None:
        return hook(n, **options)
    payloads = Payloads(0, **options)
    return [payloads.for_model(model) for _ in range(n)]


def parse_weights(spec: str) -> dict[str, int]:
    """ "a:3,b:1" → {"a": 3, "b": 1} (weight 1 when omitted); "" → every registered model at
    its `LOAD_WEIGHT` (tools/<model>/samples.py, default 1)."""
    weights = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, weight = item.partition(":")
        weights[name] = int(weight or 1)
    return weights or {m.name: m.samples().load_weight for m in registry.MODELS}
