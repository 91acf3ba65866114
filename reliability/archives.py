"""Archives the checks need besides the real ones: a model-free stand-in, broken copies of a good
archive, and a workflow archive (.war) an intruder would try to register."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build_stand_in(out: Path, name: str = "standin") -> Path:
    """A .mar of reliability/stand_in_handler.py (no weights): seconds to build and to load."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".tmp-{name}"
    tmp.mkdir(exist_ok=True)
    cmd = [
        str(Path(sys.executable).with_name("torch-model-archiver")),
        "--model-name", name,
        "--version", "1",
        "--handler", str(HERE / "stand_in_handler.py"),
        "--export-path", str(out),
        "--force",
    ]  # fmt: skip
    # The archiver wipes $TMPDIR/<model-name>: a private TMPDIR keeps parallel builds apart.
    subprocess.run(cmd, check=True, env=os.environ | {"TMPDIR": str(tmp)}, capture_output=True)
    return out / f"{name}.mar"


def truncated_copy(good: Path, out: Path, at: str = "data") -> Path:
    """A good archive torn (a download or upload cut short). `at="data"`: cut in the middle of
    its largest entry's compressed bytes, no zip any more. `at="header"`: cut inside the local
    header of the entry at the middle of the archive, which TorchServe's frontend reads as the
    archive's end (java.util.zip.ZipInputStream reports no more entries): it registers what came
    before under the file's name, with no manifest or handler."""
    data = good.read_bytes()
    with zipfile.ZipFile(good) as zf:
        entries = sorted(zf.infolist(), key=lambda i: i.header_offset)
    if at == "data":
        big = max(entries, key=lambda i: i.compress_size)
        start = big.header_offset + 30 + len(big.filename.encode()) + len(big.extra)
        cut = start + big.compress_size // 2
    else:
        middle = next(i for i in entries if i.header_offset >= len(data) // 2)
        cut = middle.header_offset + 15  # inside its 30-byte fixed header
    out.write_bytes(data[:cut])
    return out


def broken_handler_copy(good: Path, out: Path) -> Path:
    """A readable zip whose handler raises on import: the archive unpacks, the worker cannot load.

    Every .py file at the archive root (the handler entry point is one) is replaced, so the worker
    fails in its own process rather than in the frontend. The manifest takes the file's name as
    the model name: TorchServe registers a model under its manifest's name, and a second archive
    with an already-registered name stops the whole server at startup."""
    with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item.filename)
            if item.filename.endswith(".py") and "/" not in item.filename:
                data = b'raise RuntimeError("deliberately corrupt archive: handler cannot load")\n'
            elif item.filename == "MAR-INF/MANIFEST.json":
                manifest = json.loads(data)
                manifest["model"]["modelName"] = out.stem
                data = json.dumps(manifest, indent=2).encode()
            dst.writestr(item, data)
    return out


def with_model_config(good: Path, out: Path, **keys) -> Path:
    """A copy of an archive whose model-config.yaml sets `keys` (e.g. responseTimeout=5), added
    when the archive has none: a test's own limits without rebuilding the archive."""
    import yaml

    with zipfile.ZipFile(good) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        manifest = json.loads(src.read("MAR-INF/MANIFEST.json"))
        name = manifest["model"].setdefault("configFile", "model-config.yaml")
        config = yaml.safe_load(src.read(name)) if name in src.namelist() else {}
        for item in src.infolist():
            if item.filename not in (name, "MAR-INF/MANIFEST.json"):
                dst.writestr(item, src.read(item.filename))
        dst.writestr("MAR-INF/MANIFEST.json", json.dumps(manifest, indent=2))
        dst.writestr(name, yaml.safe_dump((config or {}) | keys, sort_keys=False))
    return out


def workflow_archive(out: Path, model_url: str, name: str = "intruder") -> Path:
    """A minimal valid .war: one model node (`model_url`, resolved like a model registration)."""
    manifest = {
        "createdOn": "01/01/2024 00:00:00",
        "description": "registered by an intruder",
        "archiverVersion": "0.2.15",
        "workflow": {
            "workflowName": name,
            "specFile": "spec.yaml",
            "handler": "workflow_handler.py",
        },
    }
    spec = f"models:\n  min-workers: 1\n  max-workers: 1\n  m1:\n    url: {model_url}\ndag:\n  m1: []\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as z:
        z.writestr("WAR-INF/MANIFEST.json", json.dumps(manifest))
        z.writestr("spec.yaml", spec)
        z.writestr("workflow_handler.py", "def passthrough(data, context):\n    return data\n")
    return out
