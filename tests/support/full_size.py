"""The full-size models `make serve` trains into artifacts/: tests that judge them need them.

CI's `make serve` trains them before `make test`, so there a missing model is a failure; on a
developer's machine without `make train` the test is skipped and says why. A model of another
config (a tiny one) in artifacts/ is never what such a test means to judge: it fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


def trained_manifest(artifacts: Path) -> dict:
    """The manifest of the model trained into `artifacts`; missing, fail (CI) or skip."""
    manifest = artifacts / "manifest.json"
    if not manifest.is_file():
        why = f"no {manifest} (make train or make serve builds it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true but {why}: the full-size check cannot run")
        pytest.skip(why)
    return json.loads(manifest.read_text())


def require_full_size(artifacts: Path, config: str = "default") -> Path:
    """`artifacts` when it holds a model trained with `config`; else fail (CI) or skip."""
    found = trained_manifest(artifacts).get("metrics", {}).get("config")
    assert found == config, f"{artifacts} holds the {found!r} config, not the full-size {config!r}"
    return artifacts
