"""manifest.json, the contract between training and serving: training writes it last (after the
parity gate), deploy/ verifies the files it lists by hash, the handlers read its `handler` block.

Here, not in training/, so that serving, deploy/ and the images never import training code.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from handlers.errors import ArchiveError

MANIFEST_FILE = "manifest.json"


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_manifest(artifact_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(artifact_dir) / MANIFEST_FILE).read_text())


# What every model's settings parser shares: `parse_settings(manifest, config)` reads the manifest's
# `handler` block (what the export is) and model-config.yaml's `handler:` block (serving knobs), and
# any bad or unknown value fails the load with a message that names it.


def handler_block(manifest: dict) -> dict:
    block = manifest.get("handler")
    if not isinstance(block, dict):
        raise ArchiveError("manifest.json has no handler block")
    return block


def manifest_version(manifest: dict) -> str:
    """The artifact version every answer reports (and stream states are bound to)."""
    return str(manifest.get("version", "unknown"))


def require(block: dict, key: str, where: str) -> Any:
    if key not in block:
        raise ArchiveError(f"{where} has no {key!r}")
    return block[key]


def positive_int(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArchiveError(f"{name} must be a positive integer, not {value!r}")
    return value


def minimum_int(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ArchiveError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return value


def names(value: Any, name: str) -> tuple[str, ...]:
    """A non-empty list of strings (graph inputs and outputs, labels)."""
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(v, str) for v in value)
    ):
        raise ArchiveError(f"{name} must be a non-empty list of strings, not {value!r}")
    return tuple(value)


def text(value: Any, name: str) -> str:
    if not isinstance(value, str) or not value:
        raise ArchiveError(f"{name} must be a non-empty string, not {value!r}")
    return value


def reject_unknown_export(block: dict, known: Iterable[str], model: str) -> None:
    """A manifest key no field reads is drift between training and serving: fail, naming it."""
    unknown = sorted(set(block) - set(known))
    if unknown:
        raise ArchiveError(
            f"unknown keys in the {model} manifest handler block: {', '.join(unknown)}"
        )
