"""Serving from S3: publish the real sentiment archive, promote it, pull the production stage into
an empty model store with the same command the Kubernetes init container runs, start TorchServe
on that store, and get an answer from the pulled model."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from deploy.s3 import Layout, StoreSettings, promote, publish
from handlers.manifest import sha256_file
from tests.support.torchserve import TorchServe

pytestmark = [pytest.mark.integration, pytest.mark.slow]
MiB = 1024 * 1024


def pull(model: str, store, bucket: str, s3_env) -> subprocess.CompletedProcess:
    """The production stage of `model` pulled into `store` with the init container's command."""
    pulled = subprocess.run(
        [sys.executable, "-m", "deploy", "pull", model, "--stage", "production"]
        + ["--dest", str(store), "--bucket", bucket, "--prefix", "models", "--no-progress"],
        env=os.environ | s3_env.env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert pulled.returncode == 0, pulled.stderr
    return pulled


def test_archive_pulled_from_the_production_stage_loads_and_answers(
    s3_env, s3_bucket, sentiment_archive, tmp_path
):
    layout = Layout(s3_bucket, "models")
    # The real archive is tens of MB: send it in parts as a large production archive would go.
    parts = StoreSettings(multipart_threshold=8 * MiB, multipart_chunksize=8 * MiB)
    published = publish(
        sentiment_archive, layout, version="serve-1", settings=parts, progress=False
    )
    assert published.multipart
    promote("sentiment", "serve-1", "production", layout)

    store = tmp_path / "model-store"
    pulled = pull("sentiment", store, s3_bucket, s3_env)
    assert "verified" in pulled.stdout
    assert os.listdir(store) == ["sentiment.mar"]
    assert sha256_file(store / "sentiment.mar") == sha256_file(sentiment_archive)

    server = TorchServe(workdir=tmp_path / "server", store=store, models=["sentiment"]).start()
    try:
        r = server.post("/predictions/sentiment", json={"text": "A wonderful, moving film."})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["label"] in ("negative", "positive")
        # The server answers with the model that was published and pulled, not some other one.
        assert body["model"]["version"] == published.manifest["training_version"]
    finally:
        server.stop()


def test_the_tabular_archive_goes_through_the_store_as_sentiment_does(
    s3_env, s3_bucket, tabular_archive, tmp_path
):
    """The store names no model: the newest model (tabular) is published, promoted, pulled by the
    init container's command and served from the pulled archive as sentiment is above."""
    from tools import registry as tools

    layout = Layout(s3_bucket, "models")
    published = publish(tabular_archive, layout, version="t-1", progress=False)
    promote("tabular", "t-1", "production", layout)
    store = tmp_path / "model-store"
    pull("tabular", store, s3_bucket, s3_env)
    assert sha256_file(store / "tabular.mar") == sha256_file(tabular_archive)
    server = TorchServe(workdir=tmp_path / "server", store=store, models=["tabular"]).start()
    try:
        r = server.post("/predictions/tabular", json=tools.get("tabular").example())
        assert r.status_code == 200, r.text
        assert r.json()["model"]["version"] == published.manifest["training_version"]
    finally:
        server.stop()
