"""What a .mar says about itself, and the manifest we publish beside it.

The training manifest (artifacts/<model>/manifest.json) is packed at the archive root by
deploy.archive; it carries the version, git commit, package versions and metrics.
"""

from __future__ import annotations

import datetime as dt
import json
import zipfile
from pathlib import Path

from deploy.s3.errors import StoreError

# The package versions a serving image must agree with; the rest stay in the training manifest.
REPORTED_PACKAGES = ("torch", "torchserve", "transformers", "onnxruntime")


def read_training_manifest(archive: str | Path) -> dict:
    """manifest.json from the archive root; a .mar without one was not built by deploy.archive."""
    try:
        with zipfile.ZipFile(archive) as zf:
            raw = zf.read("manifest.json")
    except FileNotFoundError:
        raise StoreError(f"{archive}: no such file") from None
    except zipfile.BadZipFile:
        raise StoreError(f"{archive}: not a .mar (zip) archive") from None
    except KeyError:
        raise StoreError(
            f"{archive}: has no manifest.json at its root; build it with `make archive`"
        ) from None
    try:
        doc = json.loads(raw)
    except json.JSONDecodeError as e:
        raise StoreError(f"{archive}: manifest.json is not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise StoreError(f"{archive}: manifest.json is not a JSON object")
    return doc


def release_manifest(
    model: str,
    version: str,
    size: int,
    sha256: str,
    training: dict,
    key: str,
    now: dt.datetime | None = None,
) -> dict:
    """The document pull trusts: the whole-file sha256 is what it verifies the download against."""
    packages = training.get("packages") or {}
    doc = {
        "model": model,
        "version": version,
        "archive": key.rsplit("/", 1)[-1],
        "size": size,
        "sha256": sha256,
        "created": (now or dt.datetime.now(dt.UTC)).isoformat(timespec="seconds"),
        "git_commit": training.get("git_commit", "unknown"),
        "family": training.get("model", model),
        "trained": training.get("created"),
        "training_version": training.get("version"),
        "metrics": training.get("metrics", {}),
        "packages": {k: packages[k] for k in REPORTED_PACKAGES if k in packages},
    }
    if training.get("mlflow"):
        # The registered MLflow model version this archive was built from (training.registry).
        doc["mlflow"] = training["mlflow"]
    return doc
