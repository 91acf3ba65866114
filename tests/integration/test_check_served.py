"""`make check-served` (deploy/check_served.py) against a real TorchServe and real MLflow PyFuncs:
the session's tiny models, served by the shared server and registered here, answer as their
training reports say over REST and gRPC and as their PyFunc does; a report the served answers do
not reach, a version other than the served one, or a PyFunc of another model each fail it."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from deploy import check_served
from training.common.tracking import TrainingRun

pytestmark = pytest.mark.integration
MODELS = ("sentiment", "digits", "frequency", "tabular")


@pytest.fixture(scope="module")
def registered(served, tmp_path_factory) -> Path:
    """artifacts/ as `make serve` leaves it: copies of the served models' artifacts, each
    registered in this session's MLflow store (manifest.json gains its mlflow block)."""
    root = tmp_path_factory.mktemp("check-served") / "artifacts"
    for model in MODELS:
        out = root / model
        shutil.copytree(served.artifacts[model], out)
        manifest = json.loads((out / "manifest.json").read_text())
        with TrainingRun(model, {}) as run:
            run.finish(out, manifest, manifest["metrics"], ())
    return root


def _check(served, artifacts: Path, capsys) -> tuple[int, str]:
    status = check_served.main([
        "--artifacts", str(artifacts),
        "--config", str(served.workdir / "config.properties"),
        "--keys-dir", str(served.workdir),
        "--models", *MODELS,
    ])  # fmt: skip
    return status, capsys.readouterr().out


def _edit(artifacts: Path, tmp_path: Path, model: str, change) -> Path:
    copy = tmp_path / "artifacts"
    shutil.copytree(artifacts, copy)
    path = copy / model / "manifest.json"
    manifest = json.loads(path.read_text())
    change(manifest)
    path.write_text(json.dumps(manifest))
    return copy


def test_the_served_models_answer_as_trained_over_rest_grpc_and_pyfunc(served, registered, capsys):
    status, out = _check(served, registered, capsys)
    assert status == 0, out
    assert "FAIL" not in out
    for line in ("held-out IMDB reviews right", "held-out digits right", "windows median_r",
                 "held-out records right", "REST and gRPC answers equal", "answers as served"):  # fmt: skip
        assert line in out
    assert out.count("REST and gRPC answers equal") == 4 == out.count("answers as served")
    assert "check_served: 4/4 served models answer as trained" in out


@pytest.mark.parametrize(
    "model,change,failure",
    [
        ("sentiment", lambda m: m["metrics"].update(test_accuracy_imdb=1.0), "held-out IMDB reviews right"),
        ("digits", lambda m: m["metrics"].update(test_accuracy=1.0), "held-out digits right"),
        ("frequency", lambda m: m["metrics"]["heldout_family"].update(windows_p10_r=1.0), "windows p10_r"),
        ("tabular", lambda m: m["metrics"].update(test_accuracy=1.0), "held-out records right"),
        ("digits", lambda m: m.update(version="another-training-run"), "served version"),
    ],
)  # fmt: skip
def test_a_report_the_served_answers_miss_fails_the_check(
    served, registered, tmp_path, capsys, model, change, failure
):
    # The tiny models are far from perfect: a report of a perfect model is out of their reach.
    status, out = _check(served, _edit(registered, tmp_path, model, change), capsys)
    assert status == 1
    assert re.search(rf"FAIL [^\n]*{re.escape(failure)}", out.split(f"{model} (")[1]), out
    assert f"failed: {model}" in out


def test_a_pyfunc_that_answers_otherwise_fails_the_check(served, registered, tmp_path, capsys):
    digits = json.loads((registered / "digits" / "manifest.json").read_text())["mlflow"]
    artifacts = _edit(registered, tmp_path, "sentiment", lambda m: m.update(mlflow=digits))
    status, out = _check(served, artifacts, capsys)
    assert status == 1
    assert "FAIL MLflow PyFunc models:/digits/" in out.split("sentiment (")[1], out


def test_no_server_is_its_own_exit_status(tmp_path, registered, capsys):
    config = tmp_path / "config.properties"
    config.write_text(
        "inference_address=http://127.0.0.1:9\nmanagement_address=http://127.0.0.1:9\n"
    )
    (tmp_path / "key_file.json").write_text("{}")
    status = check_served.main(["--artifacts", str(registered), "--config", str(config),
                                "--keys-dir", str(tmp_path)])  # fmt: skip
    assert status == 2
    assert "run make serve" in capsys.readouterr().err
