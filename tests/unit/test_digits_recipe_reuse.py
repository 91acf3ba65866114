"""The drawn-digits tests judge the default digits recipe; they read artifacts/digits only when
`make serve` trained it from this very checkout (tests/fixtures/digits.trained_here), else they
train the recipe themselves. A stale or foreign model must never stand in for the recipe."""

from __future__ import annotations

import dataclasses
import json

import pytest

from tests.fixtures import digits as fixture
from training.common.manifest import git_commit
from training.digits.config import CONFIGS


def _artifacts(tmp_path, config=None, commit=None):
    config = dataclasses.asdict(CONFIGS["default"]) if config is None else config
    (tmp_path / "metrics.json").write_text(json.dumps({"config": config}))
    (tmp_path / "manifest.json").write_text(json.dumps({"git_commit": commit or git_commit()}))
    return tmp_path


@pytest.fixture
def clean(monkeypatch):
    monkeypatch.setattr(fixture, "recipe_edited", lambda: False)


def test_the_default_model_of_this_commit_is_reused(tmp_path, clean):
    assert git_commit() != "unknown", "the checkout's commit is what makes a model reusable"
    assert fixture.trained_here(_artifacts(tmp_path))


def test_no_manifest_means_training(tmp_path, clean):
    _artifacts(tmp_path)
    (tmp_path / "manifest.json").unlink()
    assert not fixture.trained_here(tmp_path)


def test_another_config_is_not_the_recipe(tmp_path, clean):
    tiny = dataclasses.asdict(CONFIGS["tiny"])
    assert not fixture.trained_here(_artifacts(tmp_path, config=tiny))
    fewer = dataclasses.asdict(dataclasses.replace(CONFIGS["default"], epochs=3))
    assert not fixture.trained_here(_artifacts(tmp_path, config=fewer))


def test_a_model_of_another_commit_is_not_reused(tmp_path, clean):
    assert not fixture.trained_here(_artifacts(tmp_path, commit="0123456789ab"))


def test_edited_training_or_serving_code_means_training(tmp_path, monkeypatch):
    monkeypatch.setattr(fixture, "recipe_edited", lambda: True)
    assert not fixture.trained_here(_artifacts(tmp_path))
