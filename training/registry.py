"""The MLflow model registry: each parity-checked export becomes a version of its model
(handlers/registry.py), packaged as a PyFunc that runs the handler's own predictor.

    python -m training.registry alias MODEL champion [--version 3]   # default: newest
    python -m training.registry list MODEL
    python -m training.registry download models:/MODEL@champion --dest DIR

A version holds the artifact directory's served files exactly as the manifest lists them
(sha256-checked while staging, and each sha256 is a version tag), manifest.json and the model's
model-config.yaml, so `deploy.archive --model-uri` builds the same .mar as from artifacts/.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path

import mlflow
from mlflow.tracking import MlflowClient

from training.common.manifest import read_manifest, sha256_file
from training.common.tracking import ROOT, tracking_uri

PYFUNC_CODE = Path(__file__).with_name("pyfunc_model.py")
ARTIFACT_KEY = "model_dir"
"""The artifact name of the staged directory inside the logged model (artifacts/<ARTIFACT_KEY>)."""
SERVE_PACKAGES = ("numpy", "onnxruntime", "tokenizers", "torch", "PyYAML", "pandas", "mlflow")


class RegistryError(RuntimeError):
    pass


def stage_model_dir(out: Path, manifest: dict, dest: Path) -> Path:
    """Copy what serving needs (manifest files, manifest.json, model-config.yaml) into dest."""
    dest.mkdir(parents=True, exist_ok=True)
    for rel, digest in manifest["files"].items():
        src = out / rel
        if not src.is_file() or sha256_file(src) != digest:
            raise RegistryError(f"{src} is missing or does not match its manifest sha256")
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    shutil.copy2(out / "manifest.json", dest / "manifest.json")
    config = ROOT / "handlers" / manifest["model"] / "model-config.yaml"
    shutil.copy2(config, dest / "model-config.yaml")
    return dest


def _requirements() -> list[str]:
    pins = []
    for name in SERVE_PACKAGES:
        try:
            pins.append(f"{name}=={metadata.version(name).split('+')[0]}")
        except metadata.PackageNotFoundError:
            continue
    return pins


def register_export(model: str, out: Path, manifest: dict, uri: str | None = None) -> dict:
    """Log the PyFunc into the active run and register it; returns the version record that
    manifest.json and the S3 release manifest carry (name, version, run_id, model_uri)."""
    uri = uri or tracking_uri()
    with tempfile.TemporaryDirectory() as tmp:
        staged = stage_model_dir(Path(out), manifest, Path(tmp) / ARTIFACT_KEY)
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=str(PYFUNC_CODE),
            artifacts={ARTIFACT_KEY: str(staged)},
            code_paths=[str(ROOT / "handlers")],
            pip_requirements=_requirements(),
            model_config={"answers": "dicts"},  # "json" at load: spark_udf (pyfunc_model.py)
            registered_model_name=model,
        )
    version = str(info.registered_model_version)
    client = MlflowClient(uri)
    tags = {f"sha256.{rel}": digest for rel, digest in manifest["files"].items()}
    tags |= {"manifest_version": manifest["version"], "git_commit": manifest.get("git_commit", "")}
    for key, value in tags.items():
        client.set_model_version_tag(model, version, key, value)
    run = mlflow.active_run()
    assert run is not None, "registration runs inside the training's MLflow run"
    record = {
        "name": model,
        "version": version,
        "run_id": run.info.run_id,
        "model_uri": f"models:/{model}/{version}",
    }
    if not uri.startswith("sqlite:"):  # a server's address means something on another machine
        record["tracking_uri"] = uri
    return record


def set_alias(model: str, alias: str, version: str | None = None, uri: str | None = None) -> str:
    client = MlflowClient(uri or tracking_uri())
    if version is None:
        versions = client.search_model_versions(f"name='{model}'")
        if not versions:
            raise RegistryError(f"no registered versions of {model!r}")
        version = str(max(int(v.version) for v in versions))
    client.set_registered_model_alias(model, alias, version)
    return version


def download(model_uri: str, dest: Path, uri: str | None = None) -> tuple[Path, dict]:
    """A registered version's staged directory (manifest.json + served files) and its record."""
    mlflow.set_tracking_uri(uri or tracking_uri())
    client = MlflowClient(uri or tracking_uri())
    name, ref = _parse_models_uri(model_uri)
    try:
        mv = (
            client.get_model_version(name, ref)
            if ref.isdigit()
            else client.get_model_version_by_alias(name, ref)
        )
    except mlflow.exceptions.MlflowException as e:
        raise RegistryError(f"{model_uri}: {e.message}") from None
    local = Path(
        mlflow.artifacts.download_artifacts(
            artifact_uri=f"models:/{name}/{mv.version}", dst_path=str(dest)
        )
    )
    flavor = mlflow.models.Model.load(str(local / "MLmodel")).flavors["python_function"]
    model_dir = local / flavor["artifacts"][ARTIFACT_KEY]["path"]
    manifest = read_manifest(model_dir)
    for rel, digest in manifest["files"].items():
        if sha256_file(model_dir / rel) != mv.tags.get(f"sha256.{rel}", digest):
            raise RegistryError(f"{model_uri}: {rel} does not match the version's sha256 tag")
    record = {"name": name, "version": str(mv.version), "run_id": mv.run_id,
              "model_uri": f"models:/{name}/{mv.version}"}  # fmt: skip
    return model_dir, record


def _parse_models_uri(model_uri: str) -> tuple[str, str]:
    """models:/<name>/<version> or models:/<name>@<alias> → (name, version-or-alias)."""
    if not model_uri.startswith("models:/"):
        raise RegistryError(
            f"expected models:/<name>/<version> or models:/<name>@<alias>, got {model_uri!r}"
        )
    rest = model_uri.removeprefix("models:/")
    if "@" in rest:
        name, alias = rest.split("@", 1)
        return name, alias
    name, _, version = rest.partition("/")
    if not version.isdigit():
        raise RegistryError(f"{model_uri!r} names no version or alias")
    return name, version


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.registry", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("alias", help="point an alias (e.g. champion) at a version")
    a.add_argument("model")
    a.add_argument("alias")
    a.add_argument("--version", help="default: the newest version")
    ls = sub.add_parser("list", help="versions with their aliases and manifest versions")
    ls.add_argument("model")
    d = sub.add_parser("download", help="fetch a version's served files")
    d.add_argument("model_uri")
    d.add_argument("--dest", required=True, type=Path)
    args = p.parse_args(argv)
    try:
        if args.command == "alias":
            version = set_alias(args.model, args.alias, args.version)
            print(f"{args.model}@{args.alias} -> version {version}")
        elif args.command == "list":
            client = MlflowClient(tracking_uri())
            by_version: dict[str, list[str]] = {}
            for alias, version in client.get_registered_model(args.model).aliases.items():
                by_version.setdefault(str(version), []).append(alias)
            for v in sorted(client.search_model_versions(f"name='{args.model}'"),
                            key=lambda v: int(v.version)):  # fmt: skip
                aliases = ",".join(by_version.get(str(v.version), [])) or "-"
                print(
                    f"{v.name} {v.version} aliases={aliases} manifest={v.tags.get('manifest_version')} run={v.run_id}"
                )
        else:
            model_dir, record = download(args.model_uri, args.dest)
            print(f"{record['model_uri']} -> {model_dir}")
    except (RegistryError, mlflow.exceptions.MlflowException) as e:
        print(f"registry: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
