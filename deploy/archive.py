"""Build model_store/<name>.mar from artifacts/<model>/ with torch-model-archiver.

The archive is self-contained: the exported model for the chosen runtime, the files the manifest
lists (tokenizer, head), manifest.json, the code that serves it (`serving_files`: the shared
serving core handlers/*.py, the model's own handlers/<model>/ and its handler file; no other
model's code and no tools) and the model-config.yaml (TorchServe batching + the handler's settings). Every file is checked against the manifest's sha256
before it is packed, so a tampered artifact never becomes an archive.

    python -m deploy.archive MODEL --artifacts artifacts/MODEL --out model_store
    python -m deploy.archive --model-uri models:/MODEL@champion --out model_store

From a registered MLflow version (`--model-uri`), the version's staged files are downloaded,
checked against its sha256 tags, and archived the same way; the archive's manifest.json then
names the registered version (`mlflow` block), which `deploy publish` copies into S3.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from handlers import registry
from handlers.manifest import read_manifest, sha256_file
from handlers.registry import names as registered_models
from handlers.runtime import AUTO, RUNTIME_FILES, archive_files

ROOT = Path(__file__).resolve().parents[1]


class ArchiveBuildError(RuntimeError):
    pass


def serving_files(model: str) -> list[Path]:
    """The code a worker of `model` loads, relative to the repository: the shared serving core
    (handlers/*.py but the other models' handler files), the modality kits it is built on
    (handlers/kits/<kit>/, its registry entry's `kits`), the model's own folder handlers/<model>/
    (its model-config.yaml included) and its handler file. The Makefile's prerequisites of
    `$(STORE)/<model>.mar` are these files (tests/unit/test_make_archive_inputs.py)."""
    if model not in registered_models():
        raise ArchiveBuildError(f"unknown model {model!r}; known: {', '.join(registered_models())}")
    handlers = ROOT / "handlers"
    others = {f"{m}_handler.py" for m in registered_models() if m != model}
    core = [p for p in handlers.glob("*.py") if p.name not in others]
    folders = [handlers / model, *(ROOT / k for k in registry.get(model).kit_paths)]
    own = [
        p
        for folder in folders
        for p in (folder.rglob("*") if folder.is_dir() else [folder])
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]
    return sorted(p.relative_to(ROOT) for p in core + own)


def model_config_path(model: str) -> Path:
    return ROOT / "handlers" / model / "model-config.yaml"


def apply_overrides(config: dict, overrides: dict | None) -> dict:
    """{"maxBatchDelay": 5, "handler.threads": 1} or {"handler": {"threads": 1}} → set in the
    model-config (dots go into blocks; a dict merges into the block it names)."""
    for key, value in (overrides or {}).items():
        *blocks, leaf = key.split(".")
        target = config
        for b in blocks:
            target = target.setdefault(b, {})
        if isinstance(value, dict) and isinstance(target.get(leaf), dict):
            apply_overrides(target[leaf], value)
        else:
            target[leaf] = value
    return config


def stage_archive(
    model: str,
    artifacts: Path,
    stage: Path,
    runtime: str | None,
    registered: dict | None = None,
    overrides: dict | None = None,
) -> tuple[dict, Path]:
    """Copy what the archive carries into `stage/extra`; return (manifest, model-config path).

    registered: the MLflow model version the files came from, written into the staged manifest.
    overrides: model-config settings for this archive only (benchmarks, experiments; see
    `apply_overrides`)."""
    manifest = read_manifest(artifacts)
    config = yaml.safe_load(model_config_path(model).read_text())
    apply_overrides(config, overrides)
    handler_cfg = config.setdefault("handler", {})
    if runtime:
        handler_cfg["runtime"] = runtime
    runtime = handler_cfg.get("runtime", "onnx")
    # Top-level exports of the other runtime (model.pt, step.pt, ... for onnx) stay out: the
    # handler opens only the files of the runtime it is configured with.
    # onnx and onnx-int8 share a suffix, so their files are told apart by name; `auto` carries
    # both ONNX files (chosen at load: int8 on a CPU, fp32 on a GPU).
    if runtime != AUTO and runtime not in RUNTIME_FILES:
        raise ArchiveBuildError(f"runtime must be auto or one of {sorted(RUNTIME_FILES)}")
    own = set(archive_files(runtime))
    others = set(RUNTIME_FILES.values()) - own
    skip = {Path(f).suffix for f in others} - {Path(f).suffix for f in own}

    if stage.exists():
        shutil.rmtree(stage)
    extra = stage / "extra"
    extra.mkdir(parents=True)
    for rel, digest in manifest["files"].items():
        if "/" not in rel and (Path(rel).suffix in skip or rel in others):
            continue
        src = artifacts / rel
        if not src.is_file() or sha256_file(src) != digest:
            raise ArchiveBuildError(f"{src} is missing or does not match its manifest sha256")
        dst = extra / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    required = archive_files(runtime)[0]
    if required not in manifest["files"]:
        raise ArchiveBuildError(f"artifacts have no {required} for runtime {runtime!r}")
    if registered:
        manifest["mlflow"] = registered
        (extra / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    else:
        shutil.copy2(artifacts / "manifest.json", extra / "manifest.json")
    for rel in serving_files(model):
        dst = extra / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dst)
    cfg_path = stage / "model-config.yaml"
    cfg_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return manifest, cfg_path


def build_archive(
    model: str,
    artifacts: str | Path,
    out: str | Path,
    runtime: str | None = None,
    name: str | None = None,
    build_dir: str | Path = ROOT / "build",
    registered: dict | None = None,
    overrides: dict | None = None,
) -> Path:
    """Stage and archive; returns the path of the .mar. `overrides`: see `stage_archive`."""
    name = name or model
    artifacts, out = Path(artifacts), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    stage = Path(build_dir) / "archive" / name
    manifest, cfg_path = stage_archive(model, artifacts, stage, runtime, registered, overrides)
    cmd = [
        str(Path(sys.executable).with_name("torch-model-archiver")),
        "--model-name", name,
        "--version", manifest["version"],
        "--handler", str(ROOT / "handlers" / f"{model}_handler.py"),
        "--extra-files", str(stage / "extra"),
        "--config-file", str(cfg_path),
        "--export-path", str(out),
        "--force",
    ]  # fmt: skip
    # The archiver stages files in $TMPDIR/<model-name> and deletes that folder first: give each
    # build its own TMPDIR so parallel builds (or a folder of that name in /tmp) are never clobbered.
    tmp = stage / "tmp"
    tmp.mkdir()
    subprocess.run(cmd, check=True, env=os.environ | {"TMPDIR": str(tmp)})
    return out / f"{name}.mar"


def archive_registered(
    model_uri: str,
    out: str | Path,
    runtime: str | None = None,
    name: str | None = None,
    model: str | None = None,
    build_dir: str | Path = ROOT / "build",
) -> Path:
    """Build the .mar of a registered MLflow version (downloaded to a temporary folder)."""
    import tempfile

    from training.registry import RegistryError, download

    with tempfile.TemporaryDirectory() as tmp:
        try:
            model_dir, record = download(model_uri, Path(tmp) / "download")
        except RegistryError as e:
            raise ArchiveBuildError(str(e)) from e
        family = read_manifest(model_dir)["model"]
        if model and model != family:
            raise ArchiveBuildError(f"{model_uri} is a {family} model, not {model}")
        return build_archive(family, model_dir, out, runtime, name, build_dir, record)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "model", nargs="?", help=f"model family: one of {', '.join(registered_models())}"
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--artifacts", type=Path, help="an artifact directory (artifacts/<model>)")
    src.add_argument(
        "--model-uri", help="a registered version: models:/<name>/<n> or models:/<name>@<alias>"
    )
    p.add_argument("--out", default=ROOT / "model_store", type=Path)
    p.add_argument(
        "--runtime",
        choices=sorted([*RUNTIME_FILES, AUTO]),
        help="override the model-config's runtime",
    )
    p.add_argument("--name", help="archive/model name (default: the model family)")
    args = p.parse_args(argv)
    try:
        if args.model_uri:
            mar = archive_registered(args.model_uri, args.out, args.runtime, args.name, args.model)
        else:
            if not args.model:
                p.error("the model family is required with --artifacts")
            mar = build_archive(args.model, args.artifacts, args.out, args.runtime, args.name)
    except (ArchiveBuildError, FileNotFoundError) as e:
        print(f"archive: {e}", file=sys.stderr)
        return 1
    print(f"built {mar} ({mar.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
