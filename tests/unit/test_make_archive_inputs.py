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
        "handlers/kits/text/tokenize.py",
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


@pytest.mark.parametrize(
    "changed",
    [
        "tools/sentiment/cli.py",
        "tools/sentiment/samples.py",
        "handlers/digits/predict.py",
        "handlers/kits/image/decode.py",
        "handlers/frequency_handler.py",
    ],
)
def test_a_tool_part_or_another_models_code_rebuilds_no_archive(built, changed):
    """The archive carries neither (deploy/archive.serving_files), so neither is its input: the
    whole handlers/ package was, and editing digits/cli.py rebuilt all three archives."""
    variables, mar = built
    assert (ROOT / changed).is_file()
    out = make(variables, mar, "-n", "-W", changed)
    assert out.returncode == 0, out.stderr
    assert "deploy.archive" not in out.stdout, out.stdout


@pytest.mark.parametrize("model", ["sentiment", "frequency", "digits"])
def test_the_prerequisites_of_an_archive_are_the_code_it_carries(built, model):
    from deploy.archive import serving_files

    variables, _ = built
    store = next(v for v in variables if v.startswith("STORE=")).split("=", 1)[1]
    target = f"{store}/{model}.mar"
    out = make(variables, target, "-p", "-n", "-q")
    [line] = [x for x in out.stdout.splitlines() if x.startswith(f"{target}:")]
    prerequisites = set(line.split(":", 1)[1].split("|")[0].split())
    artifacts = {p for p in prerequisites if p.endswith(f"{model}/manifest.json")}
    assert len(artifacts) == 1
    code = prerequisites - {"deploy/archive.py"} - artifacts
    assert code == {str(p) for p in serving_files(model)}
    assert f"handlers/{model}_handler.py" in code and f"handlers/{model}/model.py" in code
