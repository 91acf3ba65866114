"""This model's overload case (`python -m reliability.overload`, loadtests/overload.py):
`OVERLOAD`, a typed tools.plugin.Overload: a full-size encoder, what its settings were before the
work was bounded, and the short and the largest valid request of the mixed load.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from tools.plugin import Overload

BEFORE = {
    "jobQueueSize": 100,
    "handler": {"max_texts": 32, "max_batch_tokens": 10**9},
}
"""What the project served before bounding the work: config.properties' job_queue_size=100, 32
texts per request, no batch budget."""
SETTINGS_SHOWN = ("max_texts", "max_text_bytes", "max_batch_tokens")
"""The handler settings the report quotes for each case."""
SMALL = {"text": "A fine film."}
"""The short request: three quarters of the users, and the probes after the load stops."""
_WORDS = "the film drags through a plot that never lands but the cast is fine "


def large(handler: dict) -> dict:
    """The largest valid request under the served handler settings."""
    texts, size = int(handler.get("max_texts", 16)), int(handler.get("max_text_bytes", 8192))
    return {"texts": [(_WORDS * (size // len(_WORDS) + 1))[:size]] * texts}


def full_size_artifacts(out: Path) -> Path:
    """The real architecture (the recipe's MiniLM layers, 256 tokens) trained for a few steps: what a batch
    costs depends on the architecture, not on how well it is trained."""
    from training.sentiment.config import DEFAULT
    from training.sentiment.pipeline import run

    if (out / "manifest.json").exists():
        return out
    cfg = replace(
        DEFAULT,
        name="overload",
        train_size=32,
        validation_size=32,
        test_size=32,
        ood_size=8,
        mc_samples=4,
    )
    run(out, cfg)
    return out


OVERLOAD = Overload(
    before=BEFORE,
    settings_shown=SETTINGS_SHOWN,
    small=SMALL,
    large=large,
    full_size_artifacts=full_size_artifacts,
)
