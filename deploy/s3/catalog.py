"""list: the published versions of one model (or all), with the stages that point at them."""

from __future__ import annotations

from dataclasses import dataclass, field

from deploy.s3 import objects
from deploy.s3.errors import NotFound
from deploy.s3.layout import STAGES, STAGES_DIR, Layout, check_name
from deploy.s3.settings import StoreSettings


@dataclass
class VersionRow:
    model: str
    version: str
    size: int
    created: str
    sha256: str
    stages: list[str] = field(default_factory=list)
    served_as: str = ""
    """The training version packed in the archive: what a served answer's model.version says
    (it differs from `version` when publish was given --version)."""


def _subfolders(client, bucket: str, prefix: str) -> list[str]:
    names = []
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix, Delimiter="/"
    ):
        names += [p["Prefix"][len(prefix) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
    return names


def model_versions(client, layout: Layout, model: str) -> list[VersionRow]:
    """Versions with a manifest (an archive without one is an unfinished publish: not listed)."""
    rows = []
    for version in _subfolders(client, layout.bucket, layout.model_dir(model)):
        if version == STAGES_DIR:
            continue
        found = objects.get_json(client, layout.bucket, layout.manifest(model, version))
        if found is None:
            continue
        doc = found[0]
        rows.append(
            VersionRow(
                model,
                version,
                doc["size"],
                doc["created"],
                doc["sha256"],
                served_as=doc.get("training_version") or version,
            )
        )
    by_version = {r.version: r for r in rows}
    for stage in STAGES:
        found = objects.get_json(client, layout.bucket, layout.stage(model, stage))
        if found and found[0].get("version") in by_version:
            by_version[found[0]["version"]].stages.append(stage)
    return sorted(rows, key=lambda r: (r.created, r.version))


def list_versions(
    layout: Layout, model: str | None = None, settings: StoreSettings | None = None
) -> list[VersionRow]:
    client = (settings or StoreSettings()).client()
    with objects.store_errors(layout.bucket):
        objects.check_bucket(client, layout.bucket)
        if model is None:
            models = _subfolders(client, layout.bucket, layout.root())
            return [row for m in models for row in model_versions(client, layout, m)]
        rows = model_versions(client, layout, check_name("model", model))
        if not rows:
            raise NotFound(
                f"no published versions of {model!r} in {layout.url(layout.model_dir(model))}"
            )
        return rows


def format_rows(rows: list[VersionRow]) -> str:
    header = (
        f"{'MODEL':<14} {'VERSION':<32} {'SIZE':>10} {'CREATED':<25} {'SHA256':<14} "
        f"{'STAGES':<18} MODEL.VERSION"
    )
    lines = [header]
    for r in rows:
        lines.append(
            f"{r.model:<14} {r.version:<32} {r.size:>10} {r.created:<25} {r.sha256[:12]:<14} "
            f"{','.join(r.stages) or '-':<18} {r.served_as or r.version}"
        )
    return "\n".join(lines)
