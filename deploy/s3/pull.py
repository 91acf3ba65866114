"""pull: download a version (or what a stage points at), verify it, and only then put it in place.

The bytes land in a hidden temp file inside the destination (same file system, so the final
rename is atomic), are hashed from disk, and are renamed to <name>.mar only if size and sha256
match the published manifest. TorchServe (or an init container's successor) therefore never sees a
partial or tampered archive under the final name, and a failure leaves nothing behind.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from botocore.exceptions import ClientError
from s3transfer.manager import TransferManager

from deploy.s3 import objects
from deploy.s3.errors import IntegrityError, NotFound, StoreError
from deploy.s3.layout import Layout, check_name, check_stage
from deploy.s3.progress import ProgressSubscriber, transfer_bar
from deploy.s3.settings import StoreSettings
from handlers.manifest import sha256_file


@dataclass(frozen=True)
class Pulled:
    path: Path
    manifest: dict
    stage: str | None


def resolve_version(client, layout: Layout, model: str, version: str | None, stage: str | None):
    if (version is None) == (stage is None):
        raise ValueError("give exactly one of version or stage")
    if version is not None:
        return check_name("version", version)
    assert stage is not None  # exactly one of the two, checked above
    found = objects.get_json(client, layout.bucket, layout.stage(model, check_stage(stage)))
    if found is None:
        raise NotFound(f"{model} has no {stage} stage in {layout.url(layout.model_dir(model))}")
    return found[0]["version"]


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def verify(path: Path, manifest: dict, source: str) -> None:
    size, digest = path.stat().st_size, sha256_file(path)
    if size != manifest["size"] or digest != manifest["sha256"]:
        raise IntegrityError(
            f"{source} does not match its manifest: got {size} bytes sha256 {digest}, "
            f"expected {manifest['size']} bytes sha256 {manifest['sha256']}; nothing was installed"
        )


def pull(
    model: str,
    dest: str | Path,
    layout: Layout,
    version: str | None = None,
    stage: str | None = None,
    name: str | None = None,
    settings: StoreSettings | None = None,
    progress: bool = True,
) -> Pulled:
    settings = settings or StoreSettings()
    check_name("model", model)
    name = name or f"{model}.mar"
    if "/" in name or name.startswith("."):
        raise ValueError(f"invalid --name {name!r}: a plain file name is expected")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    client = settings.client()
    with objects.store_errors(layout.bucket):
        objects.check_bucket(client, layout.bucket)
        version = resolve_version(client, layout, model, version, stage)
        found = objects.get_json(client, layout.bucket, layout.manifest(model, version))
        if found is None:
            raise NotFound(
                f"{model} {version} is not published in {layout.url(layout.model_dir(model))}"
            )
        manifest = found[0]
        if (manifest.get("model"), manifest.get("version")) != (model, version):
            raise IntegrityError(
                f"{layout.url(layout.manifest(model, version))} describes "
                f"{manifest.get('model')} {manifest.get('version')}, not {model} {version}"
            )
        key = layout.archive(model, version)
        fd, tmp_name = tempfile.mkstemp(dir=dest, prefix=f".{name}.", suffix=".partial")
        tmp = Path(tmp_name)
        try:
            with os.fdopen(fd, "wb") as f:
                # mkstemp makes 0600; the server may run as another user than the init container.
                os.fchmod(f.fileno(), 0o644)
                _download(client, layout, key, f, manifest["size"], settings, progress)
                f.flush()
                os.fsync(f.fileno())
            verify(tmp, manifest, layout.url(key))
            final = dest / name
            os.replace(tmp, final)
            _fsync_dir(dest)
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
    return Pulled(final, manifest, stage)


def _download(client, layout, key, fileobj, size, settings, progress) -> None:
    try:
        with (
            transfer_bar(size, f"pull {key.rsplit('/', 1)[-1]}", progress) as bar,
            TransferManager(client, settings.transfer()) as manager,
        ):
            manager.download(
                layout.bucket, key, fileobj, subscribers=[ProgressSubscriber(bar)]
            ).result()
    except ClientError as e:
        if objects.error_code(e) in {"NoSuchKey", "404"}:
            raise NotFound(f"{layout.url(key)} is missing although its manifest exists") from None
        raise
    except OSError as e:
        raise StoreError(f"cannot write the download into {fileobj.name}: {e}") from None
