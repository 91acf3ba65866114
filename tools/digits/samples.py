"""This model's hooks for the shared tools (tools/registry.py): example bodies and load payloads.

Load-test images are the held-out test split of scikit-learn's bundled digits (the last 297,
never trained or calibrated on: training/digits/data.py), as JSON grids of 0..16.
"""

from __future__ import annotations

import io
import random
from collections.abc import Callable

from tools.plugin import Samples

# A "0" from load_digits (0..16 grey levels, 8x8).
EXAMPLE = {
    "image": [
        [0, 0, 5, 13, 9, 1, 0, 0],
        [0, 0, 13, 15, 10, 15, 5, 0],
        [0, 3, 15, 2, 0, 11, 8, 0],
        [0, 4, 12, 0, 0, 8, 8, 0],
        [0, 5, 8, 0, 0, 9, 8, 0],
        [0, 4, 11, 0, 1, 12, 7, 0],
        [0, 2, 14, 5, 10, 12, 0, 0],
        [0, 0, 6, 13, 10, 0, 0, 0],
    ]
}
LOAD_WEIGHT = 1
"""Load-test tasks of this model per task of a weight-1 model."""
LOAD_COST = 1
"""A tiny CNN, but image decoding: destructive tests keep using the cheapest model."""
TEST_IMAGES = 297
"""The last images of load_digits: the held-out test split."""


def light_request(i: int) -> dict:
    """A small valid body, cheap to build (no dataset), varied by `i`: EXAMPLE shifted `i % 3`
    columns right, for the rehearsal's Locust users (REHEARSAL_MODEL=digits)."""
    shift = i % 3
    return {"image": [[0] * shift + row[: len(row) - shift] for row in EXAMPLE["image"]]}


def binary_example() -> tuple[bytes, str, dict[str, str]]:
    """EXAMPLE as a PNG upload (8-bit grey, 0..16 scaled to 0..255)."""
    import numpy as np
    from PIL import Image

    grid = np.asarray(EXAMPLE["image"], dtype=np.float32) * (255.0 / 16.0)
    out = io.BytesIO()
    Image.fromarray(grid.round().astype(np.uint8), mode="L").save(out, format="PNG")
    return out.getvalue(), "image/png", {}


def payloads(seed: int = 0, **_) -> Callable[[], dict]:
    """Held-out digits as JSON grids: mostly one image, sometimes a small list."""
    from sklearn.datasets import load_digits

    images = load_digits().images[-TEST_IMAGES:].astype(int).tolist()
    rng = random.Random(seed)

    def draw() -> dict:
        if rng.random() < 0.8:
            return {"image": rng.choice(images)}
        return {"images": rng.sample(images, 4)}

    return draw


def bench_feed(n: int, seed: int = 0, **_) -> list[dict]:
    """One held-out image per request: the unit in-process and served runs both count."""
    from sklearn.datasets import load_digits

    images = load_digits().images[-TEST_IMAGES:].astype(int).tolist()
    rng = random.Random(seed)
    return [{"image": rng.choice(images)} for _ in range(n)]


SAMPLES = Samples(
    example=EXAMPLE,
    binary_example=binary_example,
    payloads=payloads,
    bench_feed=bench_feed,
    load_weight=LOAD_WEIGHT,
    load_cost=LOAD_COST,
    light_request=light_request,
)
"""This model's hooks for the shared tools (tools/plugin.py)."""
