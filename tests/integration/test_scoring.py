"""python -m scoring on local Ray (one Ray start for the module, 2 CPUs) over tiny models: every
registered model's corpus with per-row errors and one output row per input row, scored == the
in-process ModelService to the bit and == the running TorchServe, a driver SIGKILLed mid-way and
re-run (no partition scored twice, none lost), S3 input checked against its sha256, S3 output
resumed without a part written twice."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from handlers.archive import ArchiveConfig
from handlers.rows import answer_rows
from handlers.service import ModelService
from scoring.__main__ import main
from tests.support.mlflow_server import own_store
from tools import registry

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def ray_local(moto_server):
    """One local Ray for the module's in-process jobs (they reuse it). Its workers see the S3
    server as a user's do: through the AWS variables of the environment local Ray starts in."""
    import ray

    from scoring.job import start_ray

    with pytest.MonkeyPatch.context() as env:
        for name, value in moto_server.env.items():
            env.setenv(name, value)
        start_ray(None, 2)
    yield
    ray.shutdown()


def corpus(model: str, n: int = 12) -> tuple[list[dict], dict[int, str]]:
    """n rows of the model's example, ids 100.., two of them refused (id → the kind wanted)."""
    example = registry.get(model).example()
    rows = [{"id": 100 + i} | example for i in range(n)]
    if model == "sentiment":
        rows = [{"id": 100 + i, "text": f"A fine film, scene {i}, well acted."} for i in range(n)]
        bad = {3: ({"text": ""}, "empty_input"), 7: ({"text": "   "}, "empty_input")}
    elif model == "tabular":  # the same columns: a missing value, and a NaN (null in CSV)
        bad = {3: (example | {"mean radius": None}, "bad_field"),
               7: (example | {"mean area": float("nan")}, "bad_field")}  # fmt: skip
    elif model == "frequency":
        bad = {3: ({"signal": []}, "empty_input"), 7: ({"signal": [0.5] * 30000}, "too_large")}
    else:
        bad = {3: ({"image": "bm90IGFuIGltYWdl"}, "unsupported_media_type"),
               7: ({"image": [[1, 2], [3]]}, "bad_field")}  # fmt: skip
    bad = {i: case for i, case in bad.items() if i < n}
    for i, (body, _) in bad.items():
        rows[i] = {"id": 100 + i} | body
    return rows, {100 + i: kind for i, (_, kind) in bad.items()}


def write(rows: list[dict], path: Path) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=4)
    elif path.suffix == ".csv":
        import csv

        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def as_archived(artifacts: Path) -> tuple[ModelService, int]:
    """The in-process service over `artifacts` with the model-config.yaml its archive carries."""
    config = ArchiveConfig.read(ROOT / "handlers" / "sentiment")
    return ModelService.from_dir(artifacts, config=dict(config.handler)), config.batch_size


def scored(out: Path) -> list[dict]:
    return pads.dataset(out, format="parquet").to_table().to_pylist()


@pytest.mark.parametrize(
    "model, suffix",
    [("sentiment", ".csv"), ("frequency", ".parquet"), ("digits", ".jsonl"), ("tabular", ".csv")],
)
def test_every_model_scores_its_corpus_with_per_row_errors(request, tmp_path, model, suffix):
    artifacts = request.getfixturevalue(f"{model}_artifacts")
    rows, refused = corpus(model)
    src = write(rows, tmp_path / f"in{suffix}")
    out = tmp_path / "out"
    argv = [model, "--input", str(src), "--output", str(out), "--from", str(artifacts),
            "--partition-mb", "0.0002", "--cpus", "2"]  # fmt: skip
    assert main(argv) == 0
    got = scored(out)
    ids = [int(r["id"]) for r in got]
    assert sorted(ids) == [r["id"] for r in rows]  # exactly one output row per input row
    for r in got:
        if int(r["id"]) in refused:
            assert r["error"]["kind"] == refused[int(r["id"])], r
        else:
            assert r["error"] is None and r["model.name"] == model
            if model == "tabular":  # the in-distribution score: typed columns of its own
                assert r["out_of_distribution"] in (True, False) and r["distance"] > 0, r
    report = json.loads((out / "_report.json").read_text())
    assert report["rows"] == len(rows) and report["refused"] == {
        k: list(refused.values()).count(k) for k in set(refused.values())
    }
    assert len(list(out.glob("part-*.parquet"))) == report["partitions"] > 1
    assert (
        report["sha256"] == hashlib.sha256((artifacts / "manifest.json").read_bytes()).hexdigest()
    )


def test_scored_equals_the_in_process_service_to_the_bit(sentiment_artifacts, tmp_path):
    rows, _ = corpus("sentiment", 20)
    src = write(rows, tmp_path / "in.parquet")
    out = tmp_path / "out"
    assert main(["sentiment", "--input", str(src), "--output", str(out),
                 "--from", str(sentiment_artifacts), "--workers", "2"]) == 0  # fmt: skip
    service, size = as_archived(sentiment_artifacts)
    bodies = [{"text": r["text"]} for r in rows]
    want = answer_rows(service, bodies, size)
    got = {int(r["id"]): r for r in scored(out)}
    for row, answer in zip(rows, want, strict=True):
        r = got[row["id"]]
        if "kind" in answer:
            assert r["error"]["kind"] == answer["kind"]
            continue
        assert r["label"] == answer["label"]
        for label, p in answer["probabilities"].items():
            assert r[f"probabilities.{label}"] == p  # to the bit
        assert r["uncertainty.entropy"] == answer["uncertainty"]["entropy"]


def test_scored_equals_served(served, tmp_path):
    rows, _ = corpus("sentiment", 10)
    src = write(rows, tmp_path / "in.jsonl")
    out = tmp_path / "out"
    assert main(["sentiment", "--input", str(src), "--output", str(out),
                 "--from", str(served.archives["sentiment"])]) == 0  # fmt: skip
    got = {int(r["id"]): r for r in scored(out)}
    for row in rows:
        body = {k: v for k, v in row.items() if k != "id"}
        r = served.post("/predictions/sentiment", json=body)
        if r.status_code != 200:
            assert got[row["id"]]["error"]["kind"] == r.json()["kind"]
            assert got[row["id"]]["error"]["status"] == r.status_code
            continue
        answer = r.json()
        assert got[row["id"]]["label"] == answer["label"]
        for label, p in answer["probabilities"].items():
            assert got[row["id"]][f"probabilities.{label}"] == p


def test_a_killed_driver_resumes_without_scoring_a_partition_twice(frequency_artifacts, tmp_path):
    rows, _ = corpus("frequency", 40)
    src = write(rows, tmp_path / "in.jsonl")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "scoring", "frequency", "--input", str(src), "--output",
            str(out), "--from", str(frequency_artifacts), "--partition-mb", "0.0002", "--cpus", "2",
            "--no-progress"]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while len(list(out.glob("part-*.parquet"))) < 3:
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:] if proc.stdout else ""
            assert time.monotonic() < deadline, "no partition written in 240 s"
            time.sleep(0.2)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        with_pg_killed(proc)
    assert not (out / "_report.json").exists()  # a killed job never looks complete
    done = {p.name: p.stat().st_mtime_ns for p in out.glob("part-*.parquet")}
    assert 3 <= len(done) < 40
    again = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    for name, mtime in done.items():  # finished partitions were not written again
        assert (out / name).stat().st_mtime_ns == mtime
    got = sorted(int(r["id"]) for r in scored(out))
    assert got == [r["id"] for r in rows]
    report = json.loads((out / "_report.json").read_text())
    assert report["skipped_partitions"] >= len(done) and report["rows"] == 40


def with_pg_killed(proc: subprocess.Popen) -> None:
    """What the killed driver left (its local Ray) goes with its process group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def test_s3_input_is_checked_against_its_sha256(s3_env, s3_bucket, sentiment_artifacts, tmp_path):
    rows, _ = corpus("sentiment", 4)
    data = write(rows, tmp_path / "in.jsonl").read_bytes()
    client = s3_env.client()
    good = hashlib.sha256(data).hexdigest()
    client.put_object(Bucket=s3_bucket, Key="c/good.jsonl", Body=data, Metadata={"sha256": good})
    client.put_object(Bucket=s3_bucket, Key="c/bad.jsonl", Body=data, Metadata={"sha256": "0" * 64})
    common = ["--from", str(sentiment_artifacts)]
    out = tmp_path / "good"
    assert main(["sentiment", "--input", f"s3://{s3_bucket}/c/good.jsonl", "--output", str(out),
                 *common]) == 0  # fmt: skip
    assert sorted(int(r["id"]) for r in scored(out)) == [r["id"] for r in rows]
    bad = tmp_path / "bad"
    code = main(["sentiment", "--input", f"s3://{s3_bucket}/c/bad.jsonl", "--output", str(bad),
                 *common])  # fmt: skip
    assert code != 0 and not bad.exists()


def s3_parts(client, bucket: str, prefix: str) -> dict[str, list[str]]:
    """key → its version ids (the bucket keeps every version: a rewrite would add one)."""
    versions: dict[str, list[str]] = {}
    for page in client.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for v in page.get("Versions", []):
            versions.setdefault(v["Key"], []).append(v["VersionId"])
    return {k: v for k, v in versions.items() if k.endswith(".parquet")}


def s3_json(client, bucket: str, key: str) -> dict:
    return json.loads(client.get_object(Bucket=bucket, Key=key)["Body"].read())


def test_s3_output_resumes_without_writing_a_part_twice(
    s3_env, s3_bucket, frequency_artifacts, tmp_path
):
    client = s3_env.client()
    client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    rows, refused = corpus("frequency", 12)
    src = write(rows, tmp_path / "in.jsonl")
    prefix = "scored/frequency/"
    argv = ["frequency", "--input", str(src), "--output", f"s3://{s3_bucket}/{prefix}",
            "--from", str(frequency_artifacts), "--partition-mb", "0.0002"]  # fmt: skip
    assert main(argv) == 0
    first = s3_parts(client, s3_bucket, prefix)
    report = s3_json(client, s3_bucket, prefix + "_report.json")
    assert len(first) == report["partitions"] > 2 and report["rows"] == 12
    assert report["output"] == f"s3://{s3_bucket}/{prefix}"
    got = []
    for key in first:
        obj = client.get_object(Bucket=s3_bucket, Key=key)
        body = obj["Body"].read()
        assert obj["Metadata"]["sha256"] == hashlib.sha256(body).hexdigest()
        got += pq.read_table(pa.BufferReader(body)).to_pylist()
    assert sorted(int(r["id"]) for r in got) == [r["id"] for r in rows]
    assert {int(r["id"]): r["error"]["kind"] for r in got if r["error"]} == refused

    # A run that lost two parts (and so never wrote its report): the same command writes those two
    # only; every other part keeps its one version.
    lost = sorted(first)[:2]
    for key in lost:
        client.delete_object(Bucket=s3_bucket, Key=key, VersionId=first[key][0])
    client.delete_object(Bucket=s3_bucket, Key=prefix + "_report.json")
    assert main(argv) == 0
    again = s3_parts(client, s3_bucket, prefix)
    assert again.keys() == first.keys()
    for key, versions in again.items():
        assert len(versions) == 1
        assert (versions == first[key]) == (key not in lost), key
    report = s3_json(client, s3_bucket, prefix + "_report.json")
    assert report["skipped_partitions"] == len(first) - 2 and report["rows"] == 12

    # Another job into the same prefix is refused before anything is scored.
    other = [*argv[:-2], "--partition-mb", "1"]
    assert main(other) == 2


def test_an_s3_part_is_never_written_over(s3_env, s3_bucket):
    from scoring.outputs import open_output

    client = s3_env.client()
    client.put_bucket_versioning(Bucket=s3_bucket, VersioningConfiguration={"Status": "Enabled"})
    out = open_output(f"s3://{s3_bucket}/p")
    out.prepare()
    table = pa.table({"id": [1], "error": pa.array([None], pa.struct([("kind", pa.string())]))})
    assert out.write_part("part-00000.parquet", table) is True
    assert out.write_part("part-00000.parquet", table.slice(0, 0)) is False  # a second try
    assert out.names() == {"part-00000.parquet"}
    assert [len(v) for v in s3_parts(client, s3_bucket, "p/").values()] == [1]
    assert out.errors("part-00000.parquet") == [None]


def test_a_bad_s3_output_is_one_line(s3_env, s3_bucket, tmp_path, capsys):
    src = write(corpus("sentiment", 2)[0], tmp_path / "in.jsonl")
    base = ["sentiment", "--input", str(src)]
    assert main([*base, "--output", f"s3://{s3_bucket}"]) == 2
    assert "want s3://bucket/prefix/" in capsys.readouterr().err
    assert main([*base, "--output", "s3://no-such-bucket-here/x/"]) != 0
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def test_a_killed_worker_is_restarted_and_the_job_loses_nothing(frequency_artifacts, tmp_path):
    import psutil

    rows, _ = corpus("frequency", 30)
    src = write(rows, tmp_path / "in.jsonl")
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "scoring", "frequency", "--input", str(src), "--output",
            str(out), "--from", str(frequency_artifacts), "--partition-mb", "0.0002", "--cpus", "2",
            "--no-progress"]  # fmt: skip
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, start_new_session=True, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    killed = []
    try:
        deadline = time.monotonic() + 240
        while not killed:
            assert proc.poll() is None, "the job ended before a worker could be killed"
            assert time.monotonic() < deadline, "no scoring actor seen in 240 s"
            if list(out.glob("part-*.parquet")):
                for p in psutil.process_iter(["pid", "cmdline"]):
                    cmd = " ".join(p.info["cmdline"] or [])
                    with contextlib.suppress(ProcessLookupError):
                        if "MapWorker" in cmd and os.getsid(p.pid) == proc.pid:
                            os.kill(p.pid, signal.SIGKILL)
                            killed.append(p.pid)
            time.sleep(0.1)
        _, stderr = proc.communicate(timeout=600)
    finally:
        with_pg_killed(proc)
    assert proc.returncode == 0, stderr[-2000:]
    got = sorted(int(r["id"]) for r in scored(out))
    assert got == [r["id"] for r in rows]
    assert json.loads((out / "_report.json").read_text())["rows"] == 30


@pytest.fixture
def own_mlflow_store(tmp_path):
    """A registry of this test's own: an earlier test's tracking URI (a server it has stopped since)
    must not be the one this test registers in."""
    with own_store(f"sqlite:///{tmp_path / 'mlflow.db'}") as uri:
        yield uri


def test_a_registered_mlflow_version_scores_as_its_artifacts(
    sentiment_artifacts, tmp_path, own_mlflow_store
):
    import mlflow

    from handlers.manifest import read_manifest
    from training.registry import register_export

    manifest = read_manifest(sentiment_artifacts)
    with mlflow.start_run():
        record = register_export("sentiment", sentiment_artifacts, manifest)
    rows, refused = corpus("sentiment", 10)
    src = write(rows, tmp_path / "in.jsonl")
    out = tmp_path / "out"
    assert main(["sentiment", "--input", str(src), "--output", str(out),
                 "--from", record["model_uri"]]) == 0  # fmt: skip
    report = json.loads((out / "_report.json").read_text())
    assert report["version"] == manifest["version"] and report["source"] == record["model_uri"]
    service, size = as_archived(sentiment_artifacts)
    want = answer_rows(service, [{"text": r["text"]} for r in rows], size)
    got = {int(r["id"]): r for r in scored(out)}
    for row, answer in zip(rows, want, strict=True):
        if row["id"] in refused:
            assert got[row["id"]]["error"]["kind"] == refused[row["id"]]
        else:
            assert got[row["id"]]["probabilities.positive"] == answer["probabilities"]["positive"]
    missing = ["sentiment", "--input", str(src), "--output", str(tmp_path / "o2"),
               "--from", "models:/sentiment/999"]  # fmt: skip
    assert main(missing) == 2


def test_rows_within_the_models_limits_are_always_scored(frequency_artifacts, tmp_path, capsys):
    """Four 20,000-sample signals (the model's own limit) in one batch overrun the batch's work
    budget (503 overloaded, retry): the job re-batches them, so all four are scored; only the
    rows' own faults (too long, empty) are error rows."""
    import math

    signal = [math.sin(i / 7) for i in range(20000)]
    rows = [{"id": i, "signal": signal} for i in range(4)]
    rows += [{"id": 4, "signal": [0.5] * 20001}, {"id": 5, "signal": []}]
    src = write(rows, tmp_path / "in.jsonl")
    out = tmp_path / "out"
    assert main(["frequency", "--input", str(src), "--output", str(out),
                 "--from", str(frequency_artifacts), "--cpus", "2"]) == 0  # fmt: skip
    got = {int(r["id"]): r for r in scored(out)}
    assert [got[i]["error"] for i in range(4)] == [None] * 4
    assert all(got[i]["model.name"] == "frequency" for i in range(4))
    assert got[4]["error"]["kind"] == "too_large" and got[5]["error"]["kind"] == "empty_input"
    assert json.loads((out / "_report.json").read_text())["refused"] == {
        "too_large": 1, "empty_input": 1
    }  # fmt: skip


def test_an_input_edited_in_place_is_scored_afresh(frequency_artifacts, tmp_path, capsys):
    """The same command after one signal was edited, the file's size unchanged: that partition is
    scored again (its old answer was stale); the partition whose bytes did not change is kept."""
    rows = [{"id": i, "signal": [0.25 * (i + 1)] * 64} for i in range(2)]
    src = write(rows, tmp_path / "in.jsonl")
    out = tmp_path / "out"
    argv = ["frequency", "--input", str(src), "--output", str(out),
            "--from", str(frequency_artifacts), "--partition-mb", "0.0002"]  # fmt: skip
    assert main(argv) == 0
    first = {int(r["id"]): r for r in scored(out)}
    parts = sorted(out.glob("part-*.parquet"))
    assert len(parts) == 2
    kept = parts[0].stat().st_mtime_ns
    before = src.read_bytes()
    after = before.replace(b"0.5", b"0.9")  # row 1's signal: the same size
    assert after != before and len(after) == len(before)
    src.write_bytes(after)
    capsys.readouterr()
    assert main(argv) == 0
    assert "scored afresh" in capsys.readouterr().err
    again = {int(r["id"]): r for r in scored(out)}
    assert again[0] == first[0] and parts[0].stat().st_mtime_ns == kept
    assert again[1]["components"] != first[1]["components"]
    report = json.loads((out / "_report.json").read_text())
    assert report["skipped_partitions"] == 1 and report["rows"] == 2


def test_a_rows_own_fault_is_its_error_and_the_output_is_one_dataset(sentiment_artifacts, tmp_path):
    """Rows that failed whole jobs: nesting 100,000 deep, ids of mixed types and past int64, a raw
    CR as JSON whitespace, a byte that is not UTF-8 late in a CSV, a bare CR in an unquoted CSV
    cell. Each is its row's error (or, the CR, no fault), the job goes on, and the folder reads
    back as one dataset: the id column is one type (string: JSONL and CSV have no schema)."""
    lines = [json.dumps({"id": i, "text": f"A fine film, scene {i}."}) for i in range(6)]
    lines[1] = '{"id": "b1",\r"text": "A dull film."}'  # CR: JSON whitespace, not a line break
    lines[2] = '{"id": 2, "text": ' + "[" * 100_000 + "]" * 100_000 + "}"
    lines[3] = json.dumps({"id": 2**64, "text": "A moving film."})
    lines[4] = json.dumps({"id": {"nested": 1}, "text": "A thin film."})
    jsonl = tmp_path / "in.jsonl"
    jsonl.write_text("".join(line + "\n" for line in lines))
    records = [f"{100 + i},A bright film take {i}\r\n".encode() for i in range(300)]
    records[250] = b"350,A caf\xe9 film\r\n"  # past the first 8 KB
    records[251] = b"351,A slow\rfilm\r\n"
    records[252] = b'352,"A warm,\r\nquoted ""film"""\r\n'
    src = tmp_path / "in.csv"
    src.write_bytes(b"id,text\r\n" + b"".join(records))
    out = tmp_path / "out"
    assert main(["sentiment", "--input", str(jsonl), "--input", str(src), "--output", str(out),
                 "--from", str(sentiment_artifacts), "--partition-mb", "0.004"]) == 0  # fmt: skip
    table = pq.read_table(out)  # the folder as one dataset
    assert table.schema.field("id").type == pa.string() and table.num_rows == 6 + 300
    got = table.to_pylist()
    assert [r["id"] for r in got[:6]] == ["0", "b1", None, str(2**64), None, "5"]
    assert [bool(r["error"]) for r in got[:6]] == [False, False, True, False, True, False]
    assert "nested too deep" in got[2]["error"]["reason"] and got[2]["error"]["status"] == 400
    assert "not a string or a number" in got[4]["error"]["reason"]
    csv_rows = got[6:]
    assert [r["error"]["kind"] for r in csv_rows if r["error"]] == ["bad_row", "bad_row"]
    assert "UTF-8" in csv_rows[250]["error"]["reason"] and "CR" in csv_rows[251]["error"]["reason"]
    assert csv_rows[252]["error"] is None and csv_rows[252]["id"] == "352"
    report = json.loads((out / "_report.json").read_text())
    assert report["rows"] == 306 and report["refused"] == {"bad_row": 4}


def test_a_job_level_failure_is_one_line_naming_its_cause(sentiment_artifacts, tmp_path, capfd):
    """A Parquet row group whose pages are damaged (its footer intact, so the plan reads it): the
    job fails with one line naming the file and the cause, no Ray internals."""
    src = tmp_path / "in.parquet"
    texts = [f"A fine film, take {i} " * 20 for i in range(50)]
    pq.write_table(pa.table({"id": list(range(50)), "text": texts}), src, compression="none")
    data = bytearray(src.read_bytes())
    footer = int.from_bytes(data[-8:-4], "little")
    for i in range(8, len(data) - footer - 8, 7):
        data[i] = 0xFF
    src.write_bytes(bytes(data))
    capfd.readouterr()
    code = main(["sentiment", "--input", str(src), "--output", str(tmp_path / "out"),
                 "--from", str(sentiment_artifacts)])  # fmt: skip
    err = capfd.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("scoring: failed: ") and "in.parquet" in err
    for internal in ("Ray", "ray::", "pid=", "actor", "Traceback", "MapWorker"):
        assert internal not in err, err
