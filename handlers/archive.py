"""What an archive or a model folder holds, read in one place: a `.mar` unpacked, and its
model-config.yaml read once into `ArchiveConfig`: TorchServe's batching keys and the `handler:`
block (the model's serving settings). TorchServe's frontend reads the same file itself; the
handler, the OIP server, offline scoring, the MLflow PyFunc and bench read it here."""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from handlers.errors import ArchiveError

MODEL_CONFIG = "model-config.yaml"
"""The archive's TorchServe config; its `handler:` block is the model's serving settings."""


@dataclass(frozen=True)
class ArchiveConfig:
    """A model-config.yaml as the servers use it; a folder without one gets TorchServe's
    defaults and no `handler:` settings (the model's settings defaults)."""

    batch_size: int = 1
    """`batchSize`: requests the frontend hands a worker at once."""
    max_batch_delay_ms: float = 0.0
    """`maxBatchDelay`: how long a batch waits to fill."""
    min_workers: int = 1
    """`minWorkers`: workers started for the model."""
    job_queue_size: int = 100
    """`jobQueueSize`: requests held while the workers are busy (TorchServe's default 100)."""
    handler: Mapping[str, Any] = field(default_factory=dict)
    """The `handler:` block: the model's serving settings (handlers/settings.py validates it)."""

    @classmethod
    def read(cls, model_dir: str | Path) -> ArchiveConfig:
        path = Path(model_dir) / MODEL_CONFIG
        raw = (yaml.safe_load(path.read_text()) or {}) if path.is_file() else {}
        return cls(
            batch_size=max(1, int(raw.get("batchSize") or 1)),
            max_batch_delay_ms=float(raw.get("maxBatchDelay") or 0),
            min_workers=int(raw.get("minWorkers") or 1),
            job_queue_size=int(raw.get("jobQueueSize") or 100),
            handler=dict(raw.get("handler") or {}),
        )


def unpack(archive: str | Path, into: str | Path) -> Path:
    """A `.mar` unpacked into `into` (returned): the folder TorchServe's worker would load. A
    missing or unreadable archive is an ArchiveError naming it."""
    into = Path(into)
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(into)
    except FileNotFoundError:
        raise ArchiveError(f"{archive}: no such archive") from None
    except (zipfile.BadZipFile, OSError) as err:
        raise ArchiveError(f"{archive}: not a readable .mar ({err})") from None
    return into
