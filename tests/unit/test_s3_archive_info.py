"""Reading the training manifest out of a .mar and the release manifest published beside it."""

import datetime as dt
import json
import zipfile

import pytest

from deploy.s3.archive_info import read_training_manifest, release_manifest
from deploy.s3.errors import StoreError
from tests.fixtures.s3 import write_fake_mar


def test_training_manifest_is_read_from_the_archive_root(tmp_path):
    mar = write_fake_mar(tmp_path / "sentiment.mar", "2026.01.02-030405-abc")
    assert read_training_manifest(mar)["version"] == "2026.01.02-030405-abc"


def test_archive_without_manifest_is_refused_with_how_to_build_one(tmp_path):
    mar = tmp_path / "x.mar"
    with zipfile.ZipFile(mar, "w") as zf:
        zf.writestr("handler.py", "")
    with pytest.raises(StoreError, match="make archive"):
        read_training_manifest(mar)


def test_non_zip_file_is_refused(tmp_path):
    mar = tmp_path / "x.mar"
    mar.write_bytes(b"not a zip")
    with pytest.raises(StoreError, match="not a .mar"):
        read_training_manifest(mar)


def test_release_manifest_carries_identity_integrity_metrics_and_versions(tmp_path):
    training = json.loads(
        zipfile.ZipFile(write_fake_mar(tmp_path / "s.mar", "v1")).read("manifest.json")
    )
    now = dt.datetime(2026, 2, 3, 4, 5, 6, tzinfo=dt.UTC)
    doc = release_manifest(
        "sentiment", "v1", 123, "ab" * 32, training, "p/sentiment/v1/sentiment.mar", now
    )
    assert doc["model"] == "sentiment" and doc["version"] == "v1"
    assert doc["size"] == 123 and doc["sha256"] == "ab" * 32
    assert doc["archive"] == "sentiment.mar"
    assert doc["created"] == "2026-02-03T04:05:06+00:00"
    assert doc["git_commit"] == training["git_commit"]
    assert doc["metrics"] == {"accuracy": 0.875}
    # the serving-relevant packages only
    assert doc["packages"] == {"torch": "2.13.0", "torchserve": "0.12.0", "transformers": "5.24.0"}
    assert "mlflow" not in doc  # an untracked training run names no registered version


def test_release_manifest_names_the_registered_mlflow_version():
    record = {
        "name": "sentiment",
        "version": "7",
        "run_id": "r1",
        "model_uri": "models:/sentiment/7",
    }
    doc = release_manifest("sentiment", "v1", 1, "0" * 64, {"mlflow": record}, "p/s.mar")
    assert doc["mlflow"] == record


def test_single_put_carries_the_whole_file_sha256_and_multipart_a_per_part_sha256():
    import base64

    from deploy.s3.publish import checksum_args
    from deploy.s3.settings import StoreSettings

    settings = StoreSettings(multipart_threshold=1000)
    digest = "ab" * 32
    single = checksum_args(digest, 999, settings)
    assert base64.b64decode(single["ChecksumSHA256"]) == bytes.fromhex(digest)
    assert single["ChecksumAlgorithm"] == "SHA256" and single["Metadata"] == {"sha256": digest}
    parts = checksum_args(digest, 1000, settings)
    # S3 accepts only CRC full-object checksums on multipart uploads: no whole-file SHA-256 there.
    assert "ChecksumSHA256" not in parts and parts["ChecksumAlgorithm"] == "SHA256"
    assert parts["Metadata"] == {"sha256": digest}
