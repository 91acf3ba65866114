"""Which model scores: a registered name, from its local artifacts (default `artifacts/<model>`),
a `.mar`, or an MLflow model URI (`models:/<name>/<version or alias>`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from handlers import registry
from handlers.archive import MODEL_CONFIG, unpack
from handlers.errors import ArchiveError
from handlers.manifest import MANIFEST_FILE, read_manifest, sha256_file
from scoring.errors import ScoringError

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class ModelRef:
    name: str
    model_dir: str
    """A local folder ModelService.from_dir loads (artifacts, an unpacked .mar, a staged version)."""
    version: str
    sha256: str
    """The sha256 of its manifest.json (which pins every served file's sha256)."""
    source: str
    config_dir: str
    """The folder whose model-config.yaml serves it (batchSize, the `handler:` limits and budgets):
    its own when it has one (a .mar, a registered version), else handlers/<model>/, as archived."""


def known(name: str) -> None:
    if name not in registry.names():
        raise ScoringError(f"no registered model {name!r}; known: {', '.join(registry.names())}")


def resolve(
    name: str, source: str | None, work: Path, download: Callable[[str, Path], tuple[Path, dict]]
) -> ModelRef:
    """The model `name` scores with, from `source` (default its local artifacts); a `models:/` URI
    is fetched with `download` (scoring/plugins.py's, which the caller passes in)."""
    known(name)
    source = source or str(ROOT / "artifacts" / name)
    if source.startswith("models:/"):
        try:
            model_dir, _ = download(source, work / "mlflow")
        except ScoringError:
            raise
        except Exception as err:  # why: the tracking server unreachable, a bad URI: one line
            raise ScoringError(
                f"{source}: {str(err).splitlines()[0] if str(err) else err!r}"
            ) from None
    else:
        path = Path(source)
        if path.suffix == ".mar":
            try:
                model_dir = unpack(source, work / "mar")
            except ArchiveError as err:
                raise ScoringError(str(err)) from None
        elif path.is_dir():
            model_dir = path
        else:
            raise ScoringError(f"{source}: no such artifact folder, .mar or models:/ URI")
    if not (model_dir / MANIFEST_FILE).is_file():
        raise ScoringError(f"{source}: no {MANIFEST_FILE} (not a trained export of {name})")
    manifest = read_manifest(model_dir)
    if manifest.get("model") != name:
        raise ScoringError(f"{source}: holds model {manifest.get('model')!r}, not {name!r}")
    return ModelRef(
        name=name,
        model_dir=str(model_dir.resolve()),
        version=str(manifest.get("version", "")),
        sha256=sha256_file(model_dir / MANIFEST_FILE),
        source=source,
        config_dir=str(
            model_dir.resolve()
            if (model_dir / MODEL_CONFIG).is_file()
            else registry.get(name).model_config.parent
        ),
    )
