"""This model's hooks for the shared tools (tools/registry.py): example bodies, load payloads,
its training options and its stream-state key."""

from __future__ import annotations

import os
import random
from collections.abc import Callable

import numpy as np

from handlers.kits.signal.state import KEY_FILE_ENV
from tools.plugin import Samples

# "stream": damaged copies also reach the stream fields and the state the answer signs.
EXAMPLE = {"signal": [0.0, 0.5, 1.0, 0.5, 0.0, -0.5, -1.0, -0.5] * 16, "stream": True}
LOAD_WEIGHT = 1
"""Load-test tasks of this model per task of a weight-1 model."""
LOAD_COST = 0
"""A small LSTM: the cheapest model to load, so destructive tests use it."""

STATE_KEY = KEY_FILE_ENV
"""The variable naming the file of the key that signs stream state: the pods mount the Secret
torchserve-stream-state-key there."""

SAMPLE_RATE = 1000.0
"""Hz; what the model was trained on."""
SIGNAL_LENGTHS = (250, 1000, 2000, 4000)
"""Samples per load-test request: from a quarter second to a few seconds."""
EXTRACT = ((1.0,), (1.0, 3.0), (1.0, 3.0, 5.0, 7.0))
"""Which components a load-test request asks for."""


BENCH_BODIES = ("json", "float32")
"""The body kinds `python -m bench` sends this model (float32: clients/kits/signal.py request_float32)."""


def bench_arguments(group) -> None:
    """`python -m bench` options: they reach bench_feed as keyword arguments."""
    group.add_argument("--signal-samples", type=int, default=2000, help="request length")


def binary_example() -> tuple[bytes, str, dict[str, str]]:
    """EXAMPLE's signal as a float32 body."""
    from clients.kits.signal import request_float32

    body, headers = request_float32(EXAMPLE["signal"])
    return body, headers["Content-Type"], {}


def train_args() -> list[str]:
    """FREQUENCY_ARCH=lstm-attention trains the attention variant (docs/architecture.md)."""
    return ["--arch", os.environ.get("FREQUENCY_ARCH", "lstm")]


def synthetic_signal(
    n: int,
    sample_rate: float = SAMPLE_RATE,
    frequencies: tuple[float, ...] = (1.0, 3.0, 5.0, 7.0),
    noise: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """A sum of sinusoids with random amplitudes (0.5-1.5) and phases plus Gaussian noise, `n`
    samples: a signal of the served family (handlers/frequency/family.py) with every frequency
    present. `synthetic_example` returns its components too."""
    return synthetic_example(n, sample_rate, frequencies, noise, seed)[0]


def synthetic_example(
    n: int,
    sample_rate: float = SAMPLE_RATE,
    frequencies: tuple[float, ...] = (1.0, 3.0, 5.0, 7.0),
    noise: float = 0.1,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """`synthetic_signal` and its truth: (signal (n,) float32, components (F, n) float32)."""
    rng = np.random.default_rng(seed)
    t = np.arange(n) / sample_rate
    amps = rng.uniform(0.5, 1.5, len(frequencies))
    phases = rng.uniform(0, 2 * np.pi, len(frequencies))
    components = np.stack(
        [
            a * np.sin(2 * np.pi * f * t + p)
            for a, f, p in zip(amps, frequencies, phases, strict=True)
        ]
    )
    signal = components.sum(axis=0) + rng.normal(0, noise, n)
    return signal.astype(np.float32), components.astype(np.float32)


def payloads(
    seed: int = 0,
    signal_lengths: tuple[int, ...] = SIGNAL_LENGTHS,
    extract: tuple[tuple[float, ...], ...] = EXTRACT,
    **_,
) -> Callable[[], dict]:
    """Noisy multi-tone signals of varied length, each asking for a few components."""
    rng = random.Random(seed)
    signals = [
        synthetic_signal(n, SAMPLE_RATE, seed=seed + i).round(5).tolist()
        for i, n in enumerate(signal_lengths)
    ]

    def draw() -> dict:
        return {
            "signal": rng.choice(signals),
            "sample_rate": SAMPLE_RATE,
            "frequencies": list(rng.choice(extract)),
        }

    return draw


def light_request(i: int) -> dict:
    """A small valid body, cheap to build, varied by `i`: a quarter second of two tones whose
    second one's amplitude changes with `i`, asking for both; one-shot (no stream), for the
    Locust users of `make rollout MODEL=frequency` (REHEARSAL_MODEL=frequency)."""
    t = np.arange(250) / SAMPLE_RATE
    amplitude = 0.3 + 0.1 * (i % 5)
    signal = np.sin(2 * np.pi * 1.0 * t) + amplitude * np.sin(2 * np.pi * 3.0 * t)
    return {"signal": signal.round(4).tolist(), "sample_rate": SAMPLE_RATE, "frequencies": [1, 3]}


def bench_feed(n: int, seed: int = 0, signal_samples: int = 2000, **_) -> list[dict]:
    """Every signal the same length, asking for every frequency: the shape bench ratios quote."""
    draw = payloads(seed, signal_lengths=(signal_samples,), extract=(EXTRACT[-1],))
    return [draw() for _ in range(n)]


SAMPLES = Samples(
    example=EXAMPLE,
    binary_example=binary_example,
    payloads=payloads,
    bench_feed=bench_feed,
    bench_arguments=bench_arguments,
    light_request=light_request,
    bench_bodies=BENCH_BODIES,
    train_args=train_args,
    load_weight=LOAD_WEIGHT,
    load_cost=LOAD_COST,
    state_key=STATE_KEY,
    export=lambda: {"frequencies": EXTRACT[-1], "sample_rate": SAMPLE_RATE},
)
"""This model's hooks for the shared tools (tools/plugin.py)."""
