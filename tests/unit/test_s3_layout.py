"""Bucket keys and the names that become key segments and file names."""

import pytest

from deploy.s3.layout import Layout, check_name, check_stage


def test_keys_follow_prefix_model_version_layout():
    lay = Layout("bucket", "/models/")
    assert lay.archive("sentiment", "v1") == "models/sentiment/v1/sentiment.mar"
    assert lay.manifest("sentiment", "v1") == "models/sentiment/v1/manifest.json"
    assert lay.stage("sentiment", "production") == "models/sentiment/stages/production.json"
    assert lay.root() == "models/"
    assert lay.url(lay.archive("m", "v")) == "s3://bucket/models/m/v/m.mar"


def test_keys_without_prefix_start_at_the_model():
    lay = Layout("bucket")
    assert lay.archive("sentiment", "v1") == "sentiment/v1/sentiment.mar"
    assert lay.root() == ""
    assert lay.model_dir("sentiment") == "sentiment/"


@pytest.mark.parametrize("bad", ["", "..", "a/b", "-x", "v 1", "x" * 200, "stages"])
def test_versions_that_would_escape_or_collide_in_the_layout_are_refused(bad):
    with pytest.raises(ValueError, match="version"):
        check_name("version", bad)


def test_ordinary_names_pass():
    assert check_name("version", "2026.11.25-213100-abc123") == "2026.11.25-213100-abc123"
    assert check_name("model", "sentiment_int8") == "sentiment_int8"


def test_unknown_stage_is_refused_with_the_choices():
    assert check_stage("staging") == "staging"
    with pytest.raises(ValueError, match="production, staging"):
        check_stage("prod")
