"""promote / rollback / list against a real S3 endpoint, through the CLI where a person would use it."""

from __future__ import annotations

import pytest

from deploy.__main__ import main
from deploy.s3 import Layout, NotFound, StageConflict, StoreSettings, promote, publish, pull
from deploy.s3.catalog import list_versions
from deploy.s3.stage_history import promoted
from deploy.s3.stages import read_stage, write_stage

pytestmark = pytest.mark.integration


@pytest.fixture
def three_versions(s3_env, s3_bucket, fake_mar):
    layout = Layout(s3_bucket, "models")
    for v in ("v1", "v2", "v3"):
        publish(fake_mar(v, f"weights {v}".encode()), layout, progress=False)
    return layout


def cli(layout, *args):
    return main([*args, "--bucket", layout.bucket, "--prefix", layout.prefix, "--no-progress"])


def stage_doc(layout, stage):
    return read_stage(StoreSettings().client(), layout, "sentiment", stage)


def test_promote_and_rollback_move_the_pointer_and_keep_the_history(
    three_versions, tmp_path, capsys
):
    layout = three_versions
    for v in ("v1", "v2", "v3"):
        assert cli(layout, "promote", "sentiment", v, "--stage", "production") == 0

    assert cli(layout, "rollback", "sentiment", "--stage", "production") == 0
    assert "rolled back to v2" in capsys.readouterr().out
    got = pull("sentiment", tmp_path / "store", layout, stage="production", progress=False)
    assert got.manifest["version"] == "v2"
    assert got.path.read_bytes() == (tmp_path / "src" / "v2" / "sentiment.mar").read_bytes()

    assert cli(layout, "rollback", "sentiment", "--stage", "production") == 0
    assert cli(layout, "rollback", "sentiment", "--stage", "production") == 1
    assert "no earlier version to roll back to (current: v1)" in capsys.readouterr().err

    doc, _ = stage_doc(layout, "production")
    assert doc["version"] == "v1"
    assert [(m["action"], m["version"], m["from"]) for m in doc["history"]] == [
        ("promote", "v1", None),
        ("promote", "v2", "v1"),
        ("promote", "v3", "v2"),
        ("rollback", "v2", "v3"),
        ("rollback", "v1", "v2"),
    ]


def test_list_shows_size_date_sha256_and_which_stages_point_where(three_versions, capsys):
    layout = three_versions
    promote("sentiment", "v3", "production", layout)
    promote("sentiment", "v2", "staging", layout)

    rows = {r.version: r for r in list_versions(layout, "sentiment")}
    assert sorted(rows) == ["v1", "v2", "v3"]
    assert rows["v3"].stages == ["production"] and rows["v2"].stages == ["staging"]
    assert rows["v1"].stages == []
    assert all(len(r.sha256) == 64 and r.size > 0 and r.created for r in rows.values())

    assert cli(layout, "list") == 0  # every model under the prefix
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        *("MODEL", "VERSION", "SIZE", "CREATED", "SHA256", "STAGES", "MODEL.VERSION")
    ]
    v3 = next(line.split() for line in out if " v3 " in line)
    assert v3[0] == "sentiment" and v3[2] == str(rows["v3"].size)
    assert v3[4] == rows["v3"].sha256[:12] and v3[5] == "production"
    assert v3[6] == "v3"  # what answers report: the training version packed in the archive


def test_list_shows_the_training_version_a_renamed_publish_answers_with(
    s3_env, s3_bucket, fake_mar, capsys
):
    layout = Layout(s3_bucket, "models")
    publish(fake_mar("2026.11.25-213100-abc123def456"), layout, version="rc1", progress=False)
    assert cli(layout, "list", "sentiment") == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[1] == "rc1" and row[-1] == "2026.11.25-213100-abc123def456"


def test_promoting_an_unpublished_version_is_refused(three_versions, capsys):
    with pytest.raises(NotFound, match="sentiment v9 is not published"):
        promote("sentiment", "v9", "production", three_versions)
    assert stage_doc(three_versions, "production") == (None, None)
    assert cli(three_versions, "rollback", "sentiment", "--stage", "staging") == 1
    assert "has no staging pointer" in capsys.readouterr().err


def test_a_stage_write_based_on_a_stale_read_is_refused_not_lost(three_versions):
    """Two operators read the pointer; the second write must not silently undo the first."""
    layout = three_versions
    promote("sentiment", "v1", "production", layout)
    doc, stale_etag = stage_doc(layout, "production")

    promote("sentiment", "v2", "production", layout)  # the other operator wins the race
    client = StoreSettings().client()
    with pytest.raises(StageConflict, match="changed by someone else"):
        write_stage(client, layout, promoted(doc, "sentiment", "production", "v3"), stale_etag)
    # and creating a pointer that someone else created meanwhile is refused as well
    with pytest.raises(StageConflict):
        write_stage(client, layout, promoted(None, "sentiment", "production", "v3"), None)

    now, _ = stage_doc(layout, "production")
    assert now["version"] == "v2" and len(now["history"]) == 2


def test_promote_archive_points_the_stage_at_the_version_publish_gave_it(
    s3_env, s3_bucket, fake_mar, capsys
):
    layout = Layout(s3_bucket, "models")
    archive = fake_mar("2026.11.25-213100-abc123def456")
    publish(archive, layout, progress=False)
    assert cli(layout, "promote", "sentiment", "--archive", str(archive), "--stage", "staging") == 0
    assert stage_doc(layout, "staging")[0]["version"] == "2026.11.25-213100-abc123def456"
    with pytest.raises(SystemExit) as e:  # a version and --archive: which one?
        cli(layout, "promote", "sentiment", "v1", "--archive", str(archive), "--stage", "staging")
    assert e.value.code == 2
    assert "exactly one of VERSION or --archive" in capsys.readouterr().err


def test_create_bucket_creates_it_once_and_then_says_it_is_there(s3_env, capsys):
    layout = Layout("fresh-bucket-for-create", "models")
    assert cli(layout, "create-bucket") == 0
    assert cli(layout, "create-bucket") == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "created s3://fresh-bucket-for-create",
        "already there: s3://fresh-bucket-for-create",
    ]
    s3_env.client().head_bucket(Bucket="fresh-bucket-for-create")
