"""Training against a real `mlflow server` on loopback: the run's params, per-step and final
metrics and reports, the registered versions with their sha256 tags and aliases, the PyFunc
answering exactly as the handler's predictor, `mlflow models serve`, and archiving a version."""

from __future__ import annotations

import json
import zipfile
from dataclasses import asdict
from pathlib import Path

import mlflow
import numpy as np
import pandas as pd
import pytest
import requests
import yaml
from mlflow.tracking import MlflowClient

from tests.support.mlflow_server import mlflow_server, model_server
from training.common.machine import describe_cpu
from training.common.tracking import TrainingRun
from training.frequency.config import CONFIGS
from training.sentiment.config import TINY

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["A warm, funny and beautifully acted film.", "Dull, slow and far too long.", "ok"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow-server")) as url:
        yield url


@pytest.fixture(scope="module")
def trained(server, tmp_path_factory):
    """Both tiny models trained, tracked and registered on the server."""
    from training.frequency.__main__ import run as run_frequency
    from training.sentiment.pipeline import run as run_sentiment

    out = {m: tmp_path_factory.mktemp(f"{m}-tracked") for m in ("sentiment", "frequency")}
    manifests = {}
    with TrainingRun("sentiment", asdict(TINY), uri=server) as tracking:
        manifests["sentiment"] = run_sentiment(out["sentiment"], TINY, tracking=tracking)
    with TrainingRun("frequency", asdict(CONFIGS["tiny"]), uri=server) as tracking:
        manifests["frequency"] = run_frequency(
            out["frequency"], CONFIGS["tiny"], plots=True, tracking=tracking, progress=False
        )
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(server)
    yield out, manifests
    # mlflow keeps the URI process-wide: later tests must not talk to this stopped server.
    mlflow.set_tracking_uri(previous)


def _local(tmp_path: Path) -> str:
    """A download folder of the test's own (MLflow's default is a temp folder it never removes)."""
    (tmp_path / "pyfunc").mkdir(exist_ok=True)
    return str(tmp_path / "pyfunc")


def test_training_run_logs_params_step_metrics_and_reports(server, trained):
    _, manifests = trained
    client = MlflowClient(server)
    run = client.get_run(manifests["sentiment"]["mlflow"]["run_id"])
    assert run.info.status == "FINISHED"
    assert run.data.params["max_length"] == str(TINY.max_length)
    assert run.data.params["train_size"] == str(TINY.train_size)
    # The CPU every timing of the run came from (training/common/machine.py).
    assert run.data.params["machine.class"] == describe_cpu()["class"]
    assert "machine.cpus" not in run.data.metrics
    m = manifests["sentiment"]["metrics"]
    assert run.data.metrics["test_accuracy"] == pytest.approx(m["test_accuracy"])
    assert run.data.metrics["ece_after"] == pytest.approx(m["ece_after"])
    steps = client.get_metric_history(run.info.run_id, "train_loss")
    assert len(steps) >= TINY.train_size // TINY.batch_size  # one point per step here
    files = {f.path for f in client.list_artifacts(run.info.run_id, "reports")}
    for name in ("training_curve.png", "reliability.png", "parity.json", "manifest.json"):
        assert f"reports/{name}" in files
    logged = json.loads(
        Path(client.download_artifacts(run.info.run_id, "reports/manifest.json")).read_text()
    )
    assert logged["files"] == manifests["sentiment"]["files"]

    freq = client.get_run(manifests["frequency"]["mlflow"]["run_id"])
    assert freq.data.params["window"] == str(CONFIGS["tiny"].window)
    assert "quality.stream.p10_r" in freq.data.metrics
    assert client.get_metric_history(freq.info.run_id, "train_mse")
    assert client.get_metric_history(freq.info.run_id, "val_mse")
    # Every candidate seed's curve too, replayed from its process's CSV log.
    seed = manifests["frequency"]["metrics"]["seed"]
    assert client.get_metric_history(freq.info.run_id, f"candidates.seed-{seed}.train_mse")
    assert f"candidates.seed-{seed}.validation_score" in freq.data.metrics
    files = {f.path for f in client.list_artifacts(freq.info.run_id, "reports")}
    assert {"reports/test_components.png", "reports/parity.json"} <= files


def test_each_export_is_a_version_tagged_with_its_sha256s_and_aliases_move(server, trained):
    from training.registry import set_alias

    _, manifests = trained
    client = MlflowClient(server)
    for model, manifest in manifests.items():
        record = manifest["mlflow"]
        version = client.get_model_version(model, record["version"])
        assert version.run_id == record["run_id"]
        for rel, digest in manifest["files"].items():
            assert version.tags[f"sha256.{rel}"] == digest
        assert version.tags["manifest_version"] == manifest["version"]
    assert (
        set_alias("sentiment", "champion", uri=server)
        == manifests["sentiment"]["mlflow"]["version"]
    )
    assert (
        client.get_model_version_by_alias("sentiment", "champion").version
        == (manifests["sentiment"]["mlflow"]["version"])
    )


def _close(a, b, path="") -> None:
    """Same structure; floats within 1e-5."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert b == pytest.approx(a, abs=1e-5), path
    else:
        assert a == b, path


def test_sentiment_pyfunc_answers_as_the_handler_predictor(server, trained, tmp_path):
    from handlers.sentiment.predict import SentimentPredictor
    from training.registry import set_alias

    out, manifests = trained
    set_alias("sentiment", "champion", uri=server)
    model = mlflow.pyfunc.load_model("models:/sentiment@champion", dst_path=_local(tmp_path))
    got = model.predict(pd.DataFrame({"text": TEXTS}))
    serving = yaml.safe_load((ROOT / "handlers/sentiment/model-config.yaml").read_text())["handler"]
    want = SentimentPredictor.from_dir(out["sentiment"], serving).predict(TEXTS)
    assert len(got) == len(TEXTS)
    _close(want, got)


def test_frequency_pyfunc_answers_as_the_handler_engine(server, trained, tmp_path):
    from handlers.frequency.engine import FrequencyEngine
    from handlers.frequency.settings import parse_settings
    from handlers.kits.signal.codec import SignalRequest

    out, manifests = trained
    version = manifests["frequency"]["mlflow"]["version"]
    model = mlflow.pyfunc.load_model(f"models:/frequency/{version}", dst_path=_local(tmp_path))
    rng = np.random.default_rng(0)
    signals = [
        rng.uniform(-1, 1, 300).astype(np.float32),
        rng.uniform(-1, 1, 75).astype(np.float32),
    ]
    frame = pd.DataFrame(
        {
            "signal": [s.tolist() for s in signals],
            "sample_rate": [1000, 1000],
            "frequencies": [[1.0, 5.0], [3.0]],
        }  # fmt: skip
    )
    got = model.predict(frame)
    serving = yaml.safe_load((ROOT / "handlers/frequency/model-config.yaml").read_text())["handler"]
    settings = parse_settings(manifests["frequency"], serving)
    engine = FrequencyEngine(settings, out["frequency"])
    reqs = [SignalRequest(signals[0], 1000, (1.0, 5.0), (0, 2)),
            SignalRequest(signals[1], 1000, (3.0,), (1,))]  # fmt: skip
    for answer, req, comp in zip(got, reqs, engine.windows(reqs), strict=True):
        assert answer["sample_rate"] == 1000 and answer["model"]["name"] == "frequency"
        assert [c["frequency"] for c in answer["components"]] == list(req.frequencies)
        for j, c in enumerate(answer["components"]):
            np.testing.assert_allclose(c["signal"], comp.signal[j], atol=1e-5)
            np.testing.assert_allclose(c["std"], comp.std[j], atol=1e-5)


def test_mlflow_models_serve_answers_for_a_registered_version(server, trained, tmp_path):
    from training.registry import set_alias

    set_alias("sentiment", "champion", uri=server)
    local = mlflow.pyfunc.load_model(
        "models:/sentiment@champion", dst_path=_local(tmp_path)
    ).predict(pd.DataFrame({"text": TEXTS}))
    with model_server("models:/sentiment@champion", server, tmp_path) as url:
        r = requests.post(
            f"{url}/invocations",
            json={"dataframe_split": {"columns": ["text"], "data": [[t] for t in TEXTS]}},
            timeout=60,
        )
    assert r.status_code == 200, r.text
    _close(local, r.json()["predictions"])


def test_archive_from_a_registered_version_names_it_in_the_release_manifest(
    server, trained, tmp_path, monkeypatch
):
    from deploy.archive import ArchiveBuildError, archive_registered
    from deploy.s3.archive_info import read_training_manifest, release_manifest
    from training.registry import set_alias

    _, manifests = trained
    monkeypatch.setenv("MLFLOW_TRACKING_URI", server)
    set_alias("frequency", "champion", uri=server)
    mar = archive_registered("models:/frequency@champion", tmp_path / "store", build_dir=tmp_path)
    with zipfile.ZipFile(mar) as z:
        inside = json.loads(z.read("manifest.json"))
    assert inside["files"] == manifests["frequency"]["files"]
    version = manifests["frequency"]["mlflow"]["version"]
    assert inside["mlflow"]["version"] == version
    doc = release_manifest("frequency", inside["version"], 1, "0" * 64,
                           read_training_manifest(mar), "k/frequency.mar")  # fmt: skip
    assert doc["mlflow"]["model_uri"] == f"models:/frequency/{version}"
    with pytest.raises(ArchiveBuildError, match="alias"):
        archive_registered(
            "models:/frequency@no-such-alias", tmp_path / "store", build_dir=tmp_path
        )


def test_tabular_pyfunc_answers_a_frame_of_records_as_the_service(server, tmp_path):
    """The tabular model tracked and registered like the others; its PyFunc takes a DataFrame whose
    columns are the features (one record a row) and answers each row as /predictions would, a
    refused row with its error body and status."""
    from handlers.service import ModelService, Request
    from tests.fixtures.served import handler_config
    from tools.registry import get
    from training.tabular.__main__ import run as run_tabular
    from training.tabular.config import CONFIGS as TABULAR

    with TrainingRun("tabular", asdict(TABULAR["tiny"]), uri=server) as tracking:
        manifest = run_tabular(
            tmp_path, TABULAR["tiny"], plots=False, tracking=tracking, progress=False
        )
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(server)
    try:
        model = mlflow.pyfunc.load_model(
            f"models:/tabular/{manifest['mlflow']['version']}", dst_path=_local(tmp_path)
        )
        example = get("tabular").example()
        rows = [example, example | {"mean radius": 30.0}, example | {"mean area": float("nan")}]
        got = model.predict(pd.DataFrame(rows))
    finally:
        mlflow.set_tracking_uri(previous)
    service = ModelService.from_dir(tmp_path, "tabular", handler_config("tabular"))
    for answer, row in zip(got[:2], rows, strict=False):
        [reply] = service.handle_batch(
            [Request(json.dumps(row).encode(), {"Content-Type": "application/json"})]
        )
        assert answer == json.loads(reply.body)
    assert got[2]["status"] == 400 and "'mean area'" in got[2]["error"]
