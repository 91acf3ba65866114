"""Stage pointer moves as data: promote pushes, rollback pops, history only grows."""

import datetime as dt

import pytest

from deploy.s3.errors import NothingToRollBack
from deploy.s3.stage_history import pointer_stack, promoted, rolled_back

T = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _promote_all(*versions):
    doc = None
    for v in versions:
        doc = promoted(doc, "sentiment", "production", v, now=T)
    return doc


def test_promote_points_stage_at_version_and_records_where_it_came_from():
    doc = _promote_all("v1", "v2")
    assert doc["version"] == "v2"
    assert [(m["action"], m["version"], m["from"]) for m in doc["history"]] == [
        ("promote", "v1", None),
        ("promote", "v2", "v1"),
    ]


def test_promoting_the_current_version_changes_nothing():
    doc = _promote_all("v1")
    assert promoted(doc, "sentiment", "production", "v1") is doc


def test_rollbacks_walk_back_through_promotions_in_order():
    doc = _promote_all("v1", "v2", "v3")
    doc = rolled_back(doc, "sentiment", "production", now=T)
    assert doc["version"] == "v2"
    doc = rolled_back(doc, "sentiment", "production", now=T)
    assert doc["version"] == "v1"
    assert len(doc["history"]) == 5  # nothing was erased
    with pytest.raises(NothingToRollBack, match="current: v1"):
        rolled_back(doc, "sentiment", "production")


def test_promote_after_rollback_makes_the_rolled_back_to_version_the_previous_one():
    doc = rolled_back(_promote_all("v1", "v2"), "sentiment", "production")  # now v1
    doc = promoted(doc, "sentiment", "production", "v3")
    assert pointer_stack(doc["history"]) == ["v1", "v3"]
    assert rolled_back(doc, "sentiment", "production")["version"] == "v1"


def test_rollback_without_history_is_refused():
    with pytest.raises(NothingToRollBack):
        rolled_back(None, "sentiment", "staging")
    with pytest.raises(NothingToRollBack):
        rolled_back(_promote_all("v1"), "sentiment", "production")
