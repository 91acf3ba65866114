"""This model's hooks for the shared tools (tools/registry.py): example bodies and load payloads.

Load-test records are the held-out test split of scikit-learn's bundled breast-cancer records
(training/tabular/data.py: never trained or calibrated on), as JSON objects.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tools.plugin import Samples

NAMES = (
    "mean radius", "mean texture", "mean perimeter", "mean area", "mean smoothness",
    "mean compactness", "mean concavity", "mean concave points", "mean symmetry",
    "mean fractal dimension", "radius error", "texture error", "perimeter error", "area error",
    "smoothness error", "compactness error", "concavity error", "concave points error",
    "symmetry error", "fractal dimension error", "worst radius", "worst texture",
    "worst perimeter", "worst area", "worst smoothness", "worst compactness", "worst concavity",
    "worst concave points", "worst symmetry", "worst fractal dimension",
)  # fmt: skip
"""load_breast_cancer's feature names, in its order."""
EXAMPLE = dict(zip(NAMES, (
    17.99, 10.38, 122.8, 1001.0, 0.1184, 0.2776, 0.3001, 0.1471, 0.2419, 0.07871,
    1.095, 0.9053, 8.589, 153.4, 0.006399, 0.04904, 0.05373, 0.01587, 0.03003, 0.006193,
    25.38, 17.33, 184.6, 2019.0, 0.1622, 0.6656, 0.7119, 0.2654, 0.4601, 0.1189,
), strict=True))  # fmt: skip
"""The dataset's first record (malignant), one JSON object."""


def light_request(i: int) -> dict:
    """A small valid body, cheap to build (no dataset), varied by `i`: EXAMPLE with its mean
    radius nudged by up to 2%, for the rehearsal's Locust users (REHEARSAL_MODEL=tabular)."""
    return EXAMPLE | {"mean radius": round(EXAMPLE["mean radius"] * (1 + (i % 5 - 2) / 100), 4)}


def binary_example() -> tuple[bytes, str, dict[str, str]]:
    """EXAMPLE as a CSV upload: a header row and one record."""
    header = ",".join(f'"{n}"' for n in EXAMPLE)
    return f"{header}\n{','.join(map(repr, EXAMPLE.values()))}\n".encode(), "text/csv", {}


def _test_records() -> list[dict]:
    from training.tabular.data import load_splits

    return load_splits()["test"].records


def payloads(seed: int = 0, **_) -> Callable[[], dict]:
    """Held-out records: mostly one, sometimes four in {"records": [...]}."""
    records = _test_records()
    rng = random.Random(seed)

    def draw() -> dict:
        if rng.random() < 0.8:
            return dict(rng.choice(records))
        return {"records": rng.sample(records, 4)}

    return draw


def bench_feed(n: int, seed: int = 0, **_) -> list[dict]:
    """One held-out record per request."""
    records = _test_records()
    rng = random.Random(seed)
    return [dict(rng.choice(records)) for _ in range(n)]


SAMPLES = Samples(
    example=EXAMPLE,
    binary_example=binary_example,
    payloads=payloads,
    bench_feed=bench_feed,
    load_weight=1,
    load_cost=1,
    light_request=light_request,
)
"""This model's hooks for the shared tools (tools/plugin.py)."""
