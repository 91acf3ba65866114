"""manifest.json: what an artifact directory holds, how it was made and how well it did.

It is written last, after the parity gate passed, so its presence means "complete and checked";
`make train` uses it as the target that says a model needs no training.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from importlib import metadata
from pathlib import Path

# Moved to the serving side (the contract both use); re-exported for training code.
from handlers.manifest import read_manifest, sha256_file

__all__ = ["default_version", "read_manifest", "sha256_file", "write_manifest"]

PACKAGES = ("torch", "torchserve", "transformers", "onnx", "onnxruntime", "numpy")


def git_commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def package_versions(names=PACKAGES) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def default_version(now: dt.datetime | None = None) -> str:
    """Sortable and unique enough for one team: 2026.11.25-2131-<commit>."""
    now = now or dt.datetime.now(dt.UTC)
    return f"{now:%Y.%m.%d-%H%M%S}-{git_commit()}"


def write_manifest(
    out_dir: str | Path,
    model: str,
    serve_files: list[str],
    handler: dict,
    metrics: dict,
    parity: dict,
    version: str | None = None,
    predictions: dict | None = None,
) -> dict:
    """Hash every file the archive needs and write out_dir/manifest.json.

    serve_files: paths relative to out_dir that the .mar must carry (exports, tokenizer, head).
    handler: the settings the handler parses at load (input/output names, limits, label map...).
    predictions: the per-item held-out predictions' block (training/common/heldout.py
    write_predictions), which `make check-served` compares the served answers with.
    """
    out = Path(out_dir)
    files = {}
    for rel in serve_files:
        p = out / rel
        if p.is_dir():
            for f in sorted(q for q in p.rglob("*") if q.is_file()):
                files[str(f.relative_to(out))] = sha256_file(f)
        else:
            files[rel] = sha256_file(p)
    manifest = {
        "model": model,
        "version": version or default_version(),
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": git_commit(),
        "packages": package_versions(),
        "files": files,
        "handler": handler,
        "metrics": metrics,
        "parity": parity,
    }
    if predictions is not None:
        manifest["predictions"] = predictions
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=False) + "\n")
    return manifest
