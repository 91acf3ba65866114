"""publish: upload a .mar under an immutable version, with checksums S3 verifies and a manifest.

Order matters: the archive goes up first, the manifest last. A version "exists" once its manifest
does, so a reader never sees a manifest whose archive is still uploading.

Immutability has two guards: a look before uploading (a clear message without sending gigabytes),
and conditional writes (If-None-Match: *) on the archive and the manifest, which refuse an
overwrite even when two publishers race past the first guard.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from botocore.exceptions import ClientError
from s3transfer.manager import TransferManager

from deploy.s3 import objects
from deploy.s3.archive_info import read_training_manifest, release_manifest
from deploy.s3.errors import StoreError, VersionExists
from deploy.s3.layout import Layout, check_name
from deploy.s3.progress import ProgressSubscriber, transfer_bar
from deploy.s3.settings import StoreSettings
from handlers.manifest import sha256_file


@dataclass(frozen=True)
class Published:
    manifest: dict
    archive_url: str
    manifest_url: str
    multipart: bool


@contextlib.contextmanager
def create_only(client, key: str) -> Iterator[None]:
    """Add If-None-Match: * to the request that creates `key` (PutObject, or CompleteMultipartUpload
    for a multipart upload): s3transfer does not pass that argument through itself."""

    def add_condition(params, **kwargs):
        if params.get("Key") == key:
            params["IfNoneMatch"] = "*"

    ops = ("PutObject", "CompleteMultipartUpload")
    events = client.meta.events
    for op in ops:
        events.register(
            f"before-parameter-build.s3.{op}", add_condition, unique_id=f"co-{op}-{key}"
        )
    try:
        yield
    finally:
        for op in ops:
            events.unregister(f"before-parameter-build.s3.{op}", unique_id=f"co-{op}-{key}")


def checksum_args(sha256_hex: str, size: int, settings: StoreSettings) -> dict:
    """A single PUT carries the whole-file SHA-256, which S3 verifies against the body.

    A multipart upload cannot: S3 only takes CRC full-object checksums for multipart, so each part
    carries its own SHA-256 (verified per part, composite for the object). The whole-file digest
    still travels in the metadata and the manifest, and pull checks it.
    """
    meta = {"Metadata": {"sha256": sha256_hex}, "ContentType": "application/zip"}
    if size < settings.multipart_threshold:
        digest = base64.b64encode(bytes.fromhex(sha256_hex)).decode()
        return meta | {"ChecksumAlgorithm": "SHA256", "ChecksumSHA256": digest}
    return meta | {"ChecksumAlgorithm": "SHA256"}


def upload_archive(
    client,
    layout: Layout,
    key: str,
    path: Path,
    sha256_hex: str,
    settings: StoreSettings,
    progress: bool = True,
) -> None:
    size = path.stat().st_size
    extra = checksum_args(sha256_hex, size, settings)
    with (
        transfer_bar(size, f"publish {path.name}", progress) as bar,
        TransferManager(client, settings.transfer()) as manager,
        create_only(client, key),
    ):
        future = manager.upload(
            str(path), layout.bucket, key, extra_args=extra, subscribers=[ProgressSubscriber(bar)]
        )
        try:
            future.result()
        except ClientError as e:
            if objects.error_code(e) in objects.PRECONDITION:
                raise VersionExists(
                    f"{layout.url(key)} was created by someone else while uploading; not overwritten"
                ) from None
            raise


def publish(
    archive: str | Path,
    layout: Layout,
    version: str | None = None,
    model: str | None = None,
    settings: StoreSettings | None = None,
    progress: bool = True,
) -> Published:
    """Publish `archive` as <model>/<version>; the model name is the archive's file name."""
    settings = settings or StoreSettings()
    path = Path(archive)
    training = read_training_manifest(path)
    model = check_name("model", model or path.name.removesuffix(".mar"))
    version = version or training.get("version")
    if not version:
        raise StoreError(f"{path}: its manifest has no version; pass --version")
    check_name("version", version)
    archive_key, manifest_key = layout.archive(model, version), layout.manifest(model, version)

    client = settings.client()
    with objects.store_errors(layout.bucket):
        objects.check_bucket(client, layout.bucket)
        if objects.exists(client, layout.bucket, manifest_key):
            raise VersionExists(
                f"{model} {version} is already published at {layout.url(manifest_key)}; "
                "versions are immutable, publish under a new --version"
            )
        if objects.exists(client, layout.bucket, archive_key):
            raise VersionExists(
                f"{layout.url(archive_key)} exists without a manifest (an interrupted publish?); "
                "versions are never overwritten: delete it by hand or use a new --version"
            )
        sha = sha256_file(path)
        size = os.path.getsize(path)
        upload_archive(client, layout, archive_key, path, sha, settings, progress)
        doc = release_manifest(model, version, size, sha, training, archive_key)
        try:
            objects.put_json(client, layout.bucket, manifest_key, doc, IfNoneMatch="*")
        except ClientError as e:
            if objects.error_code(e) in objects.PRECONDITION:
                raise VersionExists(f"{layout.url(manifest_key)} appeared meanwhile") from None
            raise
    return Published(
        doc, layout.url(archive_key), layout.url(manifest_key), size >= settings.multipart_threshold
    )
