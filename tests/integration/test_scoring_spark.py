"""Spark: `mlflow.pyfunc.spark_udf` over each registered model's PyFunc, in Spark local mode (one
SparkSession for the module, local[1]), answers a few rows of the model's corpus as `python -m
scoring` answers them: every answer field, to the bit, and refused rows with the same kind, reason
and HTTP status (the PyFunc's `answers: json` model config: each answer's JSON text)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from scoring.__main__ import main
from scoring.columns import ERROR, EXTRA, flatten, is_refusal
from tests.integration.test_scoring import corpus, scored
from tests.support.mlflow_server import own_store

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def spark(tmp_path_factory):
    from pyspark.sql import SparkSession

    local = tmp_path_factory.mktemp("spark")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("PYSPARK_PYTHON", sys.executable)  # the Python workers: this venv's
        env.setenv("PYSPARK_DRIVER_PYTHON", sys.executable)
        session = (
            SparkSession.builder.master("local[1]")
            .appName("scoring-spark-udf")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "1")
            .config("spark.local.dir", str(local))
            .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={local}")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        yield session
        session.stop()


@pytest.fixture(scope="module")
def ray_local():
    """One local Ray for the module's `python -m scoring` runs."""
    import ray

    from scoring.job import start_ray

    start_ray(None, 2)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def mlflow_store(tmp_path_factory):
    """A registry of the module's own (sqlite), restored after."""
    with own_store(f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}") as uri:
        yield uri


def spark_corpus(model: str) -> tuple[list[dict], dict[int, str]]:
    """The scoring test's corpus as one typed table: every row has the same columns (a Spark
    column has one type, so the digits row whose `image` is a base64 string, not a pixel grid,
    stays out), and frequency rows start no stream (its state token is no answer to compare)."""
    rows, refused = corpus(model, 10)
    if model == "digits":
        rows = [r for r in rows if not isinstance(r["image"], str)]
    if model == "frequency":
        rows = [{"id": r["id"], "signal": r["signal"]} for r in rows]
    ids = {r["id"] for r in rows}
    return rows, {i: kind for i, kind in refused.items() if i in ids}


@pytest.mark.parametrize("model", ["sentiment", "frequency", "digits"])
def test_spark_udf_answers_as_python_m_scoring(
    request, spark, ray_local, mlflow_store, tmp_path, model
):
    import mlflow
    from pyspark.sql.functions import struct

    from handlers.manifest import read_manifest
    from training.registry import register_export

    artifacts: Path = request.getfixturevalue(f"{model}_artifacts")
    with mlflow.start_run():
        uri = register_export(model, artifacts, read_manifest(artifacts))["model_uri"]
    rows, refused = spark_corpus(model)
    src = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src)  # one row group: one batch, as in Spark

    out = tmp_path / "scored"
    assert main([model, "--input", str(src), "--output", str(out), "--from", uri]) == 0
    want = {int(r["id"]): r for r in scored(out)}

    answer = mlflow.pyfunc.spark_udf(
        spark, uri, result_type="string", env_manager="local", model_config={"answers": "json"}
    )
    frame = spark.read.parquet(str(src))
    body = [c for c in frame.columns if c != "id"]
    got = {
        int(r["id"]): json.loads(r["answer"])
        for r in frame.select("id", answer(struct(*body)).alias("answer")).collect()
    }
    assert got.keys() == want.keys() == {r["id"] for r in rows}
    kinds = {}
    for rid, a in got.items():
        w = want[rid]
        if is_refusal(a):
            kinds[rid] = a["kind"]
            assert w[ERROR] == {"kind": a["kind"], "reason": a[ERROR], "status": a["status"]}
            continue
        assert w[ERROR] is None
        flat = flatten(a)
        columns = {k: v for k, v in w.items() if k not in ("id", ERROR, EXTRA)}
        assert columns and {k: flat.get(k) for k in columns} == columns  # to the bit
        rest = {k: v for k, v in flat.items() if k not in columns and v is not None}
        assert json.loads(w[EXTRA] or "{}") == rest
    assert kinds == refused and refused
