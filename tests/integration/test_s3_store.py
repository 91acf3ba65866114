"""publish -> pull against a real S3 endpoint (moto server over HTTP), and the integrity guards.

moto accepts wrong x-amz-checksum values, so the guard these tests must prove is the whole-file
sha256 in the published manifest, checked by pull before anything is installed.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import subprocess
import sys

import pytest

from deploy.s3 import IntegrityError, Layout, NotFound, StoreSettings, VersionExists, publish, pull
from deploy.s3.publish import upload_archive
from handlers.manifest import sha256_file

pytestmark = pytest.mark.integration
MiB = 1024 * 1024


def deploy_cli(env, *args):
    """The real entry point, as the init container runs it."""
    return subprocess.run(
        [sys.executable, "-m", "deploy", *args, "--prefix", "", "--no-progress"],
        env=os.environ | env.env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_publish_then_pull_is_byte_identical_with_a_complete_manifest(
    s3_env, s3_bucket, fake_mar, tmp_path
):
    mar = fake_mar("2026.01.02-030405-abc", b"w" * 4096)
    layout = Layout(s3_bucket, "models")
    done = publish(mar, layout, progress=False)  # version from the archive's own manifest

    m = done.manifest
    assert (
        done.archive_url == f"s3://{s3_bucket}/models/sentiment/2026.01.02-030405-abc/sentiment.mar"
    )
    assert (m["model"], m["version"]) == ("sentiment", "2026.01.02-030405-abc")
    assert m["size"] == mar.stat().st_size and m["sha256"] == sha256_file(mar)
    assert m["git_commit"] == "0123456789ab" and m["metrics"] == {"accuracy": 0.875}
    assert set(m["packages"]) == {"torch", "torchserve", "transformers"}
    assert m["created"].endswith("+00:00")

    # The single PUT carried the whole-file SHA-256 (S3 verifies it; moto stores it).
    head = s3_env.client().head_object(
        Bucket=s3_bucket,
        Key="models/sentiment/2026.01.02-030405-abc/sentiment.mar",
        ChecksumMode="ENABLED",
    )
    assert (
        head["ChecksumSHA256"]
        == base64.b64encode(hashlib.sha256(mar.read_bytes()).digest()).decode()
    )

    got = pull(
        "sentiment", tmp_path / "store", layout, version=m["version"], name="s.mar", progress=False
    )
    assert got.path == tmp_path / "store" / "s.mar"
    assert got.path.read_bytes() == mar.read_bytes()
    assert os.listdir(tmp_path / "store") == ["s.mar"]  # no temp file left behind
    assert (
        stat.S_IMODE(got.path.stat().st_mode) == 0o644
    )  # readable by a server running as another user


def test_large_archive_goes_up_in_sha256_checked_parts_and_pulls_back_identical(
    s3_env, s3_bucket, fake_mar, tmp_path
):
    mar = fake_mar("v-multi", os.urandom(5 * MiB + 4096))
    small_parts = StoreSettings(multipart_threshold=1 * MiB, multipart_chunksize=5 * MiB)
    done = publish(mar, Layout(s3_bucket), settings=small_parts, progress=False)
    assert done.multipart

    client, key = s3_env.client(), "sentiment/v-multi/sentiment.mar"
    assert client.head_object(Bucket=s3_bucket, Key=key, PartNumber=1)["PartsCount"] == 2
    attrs = client.get_object_attributes(Bucket=s3_bucket, Key=key, ObjectAttributes=["Checksum"])
    assert (
        attrs["Checksum"]["ChecksumType"] == "COMPOSITE" and "ChecksumSHA256" in attrs["Checksum"]
    )

    got = pull(
        "sentiment",
        tmp_path / "out",
        Layout(s3_bucket),
        version="v-multi",
        settings=small_parts,
        progress=False,
    )
    assert sha256_file(got.path) == done.manifest["sha256"] == sha256_file(mar)


def test_publishing_an_existing_version_is_refused_and_the_stored_archive_is_unchanged(
    s3_env, s3_bucket, fake_mar
):
    layout = Layout(s3_bucket)
    first = publish(fake_mar("v1", b"first"), layout, progress=False)
    client = s3_env.client()
    before = client.get_object(Bucket=s3_bucket, Key="sentiment/v1/sentiment.mar")

    result = deploy_cli(s3_env, "publish", str(fake_mar("v1", b"second")), "--bucket", s3_bucket)
    assert result.returncode == 1
    assert "already published" in result.stderr and "immutable" in result.stderr

    after = client.get_object(Bucket=s3_bucket, Key="sentiment/v1/sentiment.mar")
    assert after["ETag"] == before["ETag"]
    assert hashlib.sha256(after["Body"].read()).hexdigest() == first.manifest["sha256"]


@pytest.mark.parametrize("multipart", [False, True], ids=["single-put", "multipart"])
def test_conditional_write_refuses_overwrite_even_past_the_existence_check(
    s3_env, s3_bucket, fake_mar, multipart
):
    """Two publishers racing: both passed the look-before-upload; S3's If-None-Match stops the second."""
    settings = StoreSettings(
        multipart_threshold=1 * MiB if multipart else 64 * MiB, multipart_chunksize=5 * MiB
    )
    size = 5 * MiB + 1024 if multipart else 1024
    layout, key = Layout(s3_bucket), "sentiment/v1/sentiment.mar"
    first = publish(fake_mar("v1", os.urandom(size)), layout, settings=settings, progress=False)

    other = fake_mar("v1-other", os.urandom(size))
    with pytest.raises(VersionExists, match="not overwritten"):
        upload_archive(
            s3_env.client(), layout, key, other, sha256_file(other), settings, progress=False
        )

    client = s3_env.client()
    body = client.get_object(Bucket=s3_bucket, Key=key)["Body"].read()
    assert hashlib.sha256(body).hexdigest() == first.manifest["sha256"]
    assert not client.list_multipart_uploads(Bucket=s3_bucket).get("Uploads")  # aborted, not left


def test_archive_changed_in_the_bucket_after_publish_is_caught_and_nothing_is_installed(
    s3_env, s3_bucket, fake_mar, tmp_path
):
    publish(fake_mar("v1", b"good weights"), Layout(s3_bucket), progress=False)
    # Same size, different bytes: only the digest can tell.
    key = "sentiment/v1/sentiment.mar"
    client = s3_env.client()
    tampered = bytearray(client.get_object(Bucket=s3_bucket, Key=key)["Body"].read())
    tampered[-40] ^= 0xFF
    client.put_object(Bucket=s3_bucket, Key=key, Body=bytes(tampered))

    dest = tmp_path / "store"
    dest.mkdir()
    with pytest.raises(IntegrityError, match="does not match its manifest"):
        pull("sentiment", dest, Layout(s3_bucket), version="v1", progress=False)
    assert os.listdir(dest) == []

    result = deploy_cli(
        s3_env, "pull", "sentiment", "--version", "v1", "--dest", str(dest), "--bucket", s3_bucket
    )
    assert result.returncode == 1
    assert (
        "does not match its manifest" in result.stderr and "nothing was installed" in result.stderr
    )
    assert os.listdir(dest) == []


def test_a_failed_pull_keeps_the_archive_already_installed(s3_env, s3_bucket, fake_mar, tmp_path):
    """The final name is only ever replaced by a verified archive."""
    layout = Layout(s3_bucket)
    publish(fake_mar("v1", b"v1 weights"), layout, progress=False)
    publish(fake_mar("v2", b"v2 weights"), layout, progress=False)
    installed = pull("sentiment", tmp_path, layout, version="v1", progress=False).path.read_bytes()
    s3_env.client().put_object(Bucket=s3_bucket, Key="sentiment/v2/sentiment.mar", Body=b"junk")

    with pytest.raises(IntegrityError):
        pull("sentiment", tmp_path, layout, version="v2", progress=False)
    assert sorted(os.listdir(tmp_path)) == ["sentiment.mar", "src"]
    assert (tmp_path / "sentiment.mar").read_bytes() == installed


def test_missing_bucket_model_and_version_give_clear_errors(s3_env, s3_bucket, fake_mar, tmp_path):
    with pytest.raises(NotFound, match="bucket 'no-such-bucket' does not exist"):
        pull("sentiment", tmp_path, Layout("no-such-bucket"), version="v1", progress=False)
    with pytest.raises(NotFound, match="bucket 'no-such-bucket' does not exist"):
        publish(fake_mar("v1"), Layout("no-such-bucket"), progress=False)
    with pytest.raises(NotFound, match="sentiment v9 is not published"):
        pull("sentiment", tmp_path, Layout(s3_bucket), version="v9", progress=False)
    with pytest.raises(NotFound, match="no production stage"):
        pull("sentiment", tmp_path, Layout(s3_bucket), stage="production", progress=False)

    result = deploy_cli(s3_env, "list", "nomodel", "--bucket", s3_bucket)
    assert result.returncode == 1
    assert "no published versions of 'nomodel'" in result.stderr
    assert "Traceback" not in result.stderr
    assert not list((tmp_path).glob("*.mar"))


def test_unreachable_endpoint_fails_with_a_clear_message_not_a_traceback(s3_env, tmp_path):
    from rehearsal.pod import free_port

    result = deploy_cli(
        s3_env,
        "pull", "sentiment", "--stage", "production", "--dest", str(tmp_path),
        "--bucket", "models", "--endpoint-url", f"http://127.0.0.1:{free_port()}",
        "--max-attempts", "2", "--connect-timeout", "2",
    )  # fmt: skip
    assert result.returncode == 1
    assert "cannot reach the store for bucket 'models'" in result.stderr
    assert "Traceback" not in result.stderr and os.listdir(tmp_path) == []
