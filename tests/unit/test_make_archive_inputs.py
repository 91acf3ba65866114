"""`make archive` rebuilds an archive when any of its inputs changes, model-config.yaml included
(the documented place to switch `runtime:`), and only then."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def built(tmp_path):
    """Make variables for a tree where sentiment.mar is newer than everything it is made from."""
    later = time.time() + 3600
    venv, artifacts, store = tmp_path / "venv", tmp_path / "artifacts", tmp_path / "store"
    files = [
        venv / ".installed",
        artifacts / "sentiment" / "manifest.json",
        store / "sentiment.mar",
    ]
    for i, path in enumerate(files):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        os.utime(path, (later + i, later + i))
    return [f"VENV={venv}", f"ARTIFACTS={artifacts}", f"STORE={store}"], store / "sentiment.mar"


def make(variables, target, *flags):
    return subprocess.run(
        ["make", "-C", str(ROOT), *flags, *variables, str(target)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_an_archive_newer_than_its_inputs_is_up_to_date(built):
    variables, mar = built
    assert make(variables, mar, "-q").returncode == 0


@pytest.mark.parametrize(
    "changed",
    [
        "handlers/sentiment/model-config.yaml",
        "handlers/sentiment/predict.py",
        "handlers/sentiment_handler.py",
        "deploy/archive.py",
    ],
)
def test_changing_any_input_of_an_archive_makes_it_out_of_date(built, changed):
    variables, mar = built
    assert (ROOT / changed).is_file()
    out = make(variables, mar, "-n", "-W", changed)
    assert "deploy.archive sentiment" in out.stdout, out.stdout + out.stderr
    assert "training.sentiment" not in out.stdout  # the artifacts themselves are up to date
