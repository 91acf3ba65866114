"""promote / rollback against the bucket: read the pointer, compute the move, write it back
only if nobody moved it meanwhile (If-Match on the ETag we read; If-None-Match for the first)."""

from __future__ import annotations

from botocore.exceptions import ClientError

from deploy.s3 import objects
from deploy.s3.errors import NotFound, StageConflict
from deploy.s3.layout import Layout, check_name, check_stage
from deploy.s3.settings import StoreSettings
from deploy.s3.stage_history import promoted, rolled_back


def read_stage(client, layout: Layout, model: str, stage: str) -> tuple[dict | None, str | None]:
    found = objects.get_json(client, layout.bucket, layout.stage(model, stage))
    return found if found else (None, None)


def write_stage(client, layout: Layout, doc: dict, etag: str | None) -> str:
    """Write a stage document over exactly the version we read (etag), or create it (None)."""
    key = layout.stage(doc["model"], doc["stage"])
    condition = {"IfMatch": etag} if etag else {"IfNoneMatch": "*"}
    try:
        return objects.put_json(client, layout.bucket, key, doc, **condition)
    except ClientError as e:
        # 412: moved (or created) meanwhile; a 404 on If-Match: deleted meanwhile.
        if objects.error_code(e) in objects.PRECONDITION | {"NoSuchKey", "404"}:
            raise StageConflict(
                f"{layout.url(key)} was changed by someone else meanwhile; nothing written, "
                "look at `list` and retry"
            ) from None
        raise


def promote(
    model: str, version: str, stage: str, layout: Layout, settings: StoreSettings | None = None
) -> dict:
    check_name("model", model), check_name("version", version), check_stage(stage)
    client = (settings or StoreSettings()).client()
    with objects.store_errors(layout.bucket):
        objects.check_bucket(client, layout.bucket)
        if not objects.exists(client, layout.bucket, layout.manifest(model, version)):
            raise NotFound(
                f"{model} {version} is not published in {layout.url(layout.model_dir(model))}"
            )
        doc, etag = read_stage(client, layout, model, stage)
        new = promoted(doc, model, stage, version)
        if new is not doc:
            write_stage(client, layout, new, etag)
    return new


def rollback(model: str, stage: str, layout: Layout, settings: StoreSettings | None = None) -> dict:
    check_name("model", model), check_stage(stage)
    client = (settings or StoreSettings()).client()
    with objects.store_errors(layout.bucket):
        objects.check_bucket(client, layout.bucket)
        doc, etag = read_stage(client, layout, model, stage)
        if doc is None:
            raise NotFound(
                f"{model} has no {stage} pointer in {layout.url(layout.model_dir(model))}"
            )
        new = rolled_back(doc, model, stage)
        write_stage(client, layout, new, etag)
    return new
