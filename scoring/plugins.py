"""What the scoring commands (`python -m scoring`, scoring.bench, scoring.memory) take from the
project's other layers (tools/, training/) and hand to the job, the one module of scoring/ that
imports them. The job itself (scoring/job.py, model.py, inputs.py, outputs.py, columns.py: what each Ray actor
loads) imports only the serving core (handlers/) and its own modules (pyproject.toml's
import-linter contract `scoring`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from scoring.errors import ScoringError


def example(name: str) -> dict[str, Any]:
    """The registered model's example request (one row)."""
    from tools import registry

    return registry.get(name).example()


def bench_bodies(name: str, rows: int) -> list[dict[str, Any]]:
    """`rows` requests for a speed figure: the model's bench feed, else its example repeated."""
    from tools import registry

    spec = registry.get(name)
    feed = spec.samples().bench_feed
    return feed(rows) if feed else [spec.example() for _ in range(rows)]


def download(model_uri: str, dest: Path) -> tuple[Path, dict]:
    """A registered version's model folder and its record; a registry's refusal (no such version
    or alias, a file that does not match its sha256 tag) is a `ScoringError` saying why."""
    from training.registry import RegistryError
    from training.registry import download as fetch

    try:
        return fetch(model_uri, dest)
    except RegistryError as err:
        raise ScoringError(str(err)) from None


def cpu_line() -> str:
    """'AMD EPYC, AVX2 (avx2 fma), 2 CPUs': this machine's model, class, flags and CPUs."""
    from training.common.machine import cpu_summary, describe_cpu

    return cpu_summary(describe_cpu())
