"""manifest.json, the contract between training and serving: training writes it last (after the
parity gate), deploy/ verifies the files it lists by hash, the handlers read its `handler` block.

Here, not in training/, so that serving, deploy/ and the images never import training code.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

MANIFEST_FILE = "manifest.json"


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def read_manifest(artifact_dir: str | Path) -> dict[str, Any]:
    return json.loads((Path(artifact_dir) / MANIFEST_FILE).read_text())
