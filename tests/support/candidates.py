"""Candidate archives for rollout tests and demonstrations, built from a good archive without
retraining: a known-bad version of a classifier, and the same model under another version."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable
from pathlib import Path


def _with_manifest(mar: Path, out: Path, change: Callable[[dict], None]) -> Path:
    """A copy of `mar` at `out` whose manifest.json `change` has edited in place."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(mar) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename == "manifest.json":
                manifest = json.loads(data)
                change(manifest)
                data = json.dumps(manifest, indent=2).encode()
            dst.writestr(item, data)
    return out


def labels_swapped(mar: Path, out: Path) -> Path:
    """A copy of a classifier's .mar whose handler names its classes in reverse order: it loads,
    passes every probe and answers with the same confidence, but every label is another one (a
    training run that shipped the wrong class order). Its manifest's version gets a suffix."""

    def swap(manifest: dict) -> None:
        manifest["handler"]["classes"] = list(reversed(manifest["handler"]["classes"]))
        manifest["version"] = f"{manifest['version']}-labels-swapped"

    return _with_manifest(mar, out, swap)


def version_bumped(mar: Path, out: Path, suffix: str = "-candidate") -> Path:
    """A copy of a .mar that differs only in its manifest's version: the same answers, but to a
    frequency stream another version (its signed state names the version that made it)."""

    def bump(manifest: dict) -> None:
        manifest["version"] = f"{manifest['version']}{suffix}"

    return _with_manifest(mar, out, bump)
