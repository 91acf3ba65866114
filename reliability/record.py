"""Tests write the figures they measure here; `python -m reliability` turns them into the report.

Recording is on when RELIABILITY_RECORD names a folder; the default test run writes nothing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

RECORD_ENV = "RELIABILITY_RECORD"
EXAMPLES_ENV = "RELIABILITY_EXAMPLES"
DEFAULT_EXAMPLES = 150
"""Fuzz examples in the default test run, over all served models together (~1 s per 10)."""


def fuzz_examples() -> int:
    return int(os.environ.get(EXAMPLES_ENV, DEFAULT_EXAMPLES))


def record(section: str, **figures) -> None:
    folder = os.environ.get(RECORD_ENV)
    if not folder:
        return
    path = Path(folder) / "figures.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps({"section": section, "at": time.time(), **figures}, default=str) + "\n")


def read_records(folder: str | Path) -> list[dict]:
    path = Path(folder) / "figures.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
