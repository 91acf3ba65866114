"""The tabular archive in a real TorchServe: records as JSON objects and CSV over REST and gRPC,
the same answers as in process, explanations per feature, and each schema violation refused alone
with a 400 naming the field while its batch neighbours are answered."""

from __future__ import annotations

import json

import pytest

from clients import PROTOCOLS, connect
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config
from tests.support.torchserve import among_neighbours, job_queue_size, send_waves, start_torchserve
from tests.unit.test_tabular_kit import BAD_BODIES
from tools import registry

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(tabular_archive, tmp_path_factory):
    ts = start_torchserve(tmp_path_factory.mktemp("tabular-served"), {"tabular": tabular_archive})
    try:
        yield ts
    finally:
        ts.stop()


@pytest.fixture(scope="module")
def local(tabular_artifacts) -> ModelService:
    return ModelService.from_dir(tabular_artifacts, "tabular", handler_config("tabular"))


def in_process(local: ModelService, body: bytes, ctype: str, explain: bool = False):
    headers = {"Content-Type": ctype} | ({"explain": "true"} if explain else {})
    [reply] = local.handle_batch([Request(body, headers)])
    return json.loads(reply.body)


def csv_of(records: list[dict]) -> bytes:
    header = ",".join(f'"{k}"' for k in records[0])
    return "\n".join([header, *(",".join(map(repr, r.values())) for r in records)]).encode()


def test_json_and_csv_records_answer_as_in_process(server, local):
    record = registry.get("tabular").example()
    many = [record, record | {"mean radius": record["mean radius"] * 1.5}]
    for body, ctype in (
        (json.dumps(record).encode(), "application/json"),
        (json.dumps({"records": many}).encode(), "application/json"),
        (csv_of(many), "text/csv"),
    ):
        resp = server.post("/predictions/tabular", data=body, headers={"Content-Type": ctype})
        assert resp.status_code == 200, resp.text
        assert resp.json() == in_process(local, body, ctype)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_rest_and_grpc_predict_and_explain_alike(server, local, protocol):
    record = registry.get("tabular").example()
    client = connect(protocol, server.client_settings(timeout=60))
    try:
        body = json.dumps(record).encode()
        assert client.predict("tabular", record) == in_process(local, body, "application/json")
        explained = client.explain("tabular", record)
    finally:
        client.close()
    assert explained == in_process(local, body, "application/json", explain=True)
    assert set(explained["attributions"]) == set(record)


def test_schema_violations_are_refused_alone_and_neighbours_answered(server, local):
    record = registry.get("tabular").example()
    good = json.dumps(record).encode()
    bad = [
        (case, body, ctype, words)
        for case, body, ctype, _, words in BAD_BODIES(local.model.schema, record)
    ]
    waves = among_neighbours(
        ("good", good, "application/json", None), bad, job_queue_size("tabular")
    )

    def send(case):
        return server.post("/predictions/tabular", data=case[1], headers={"Content-Type": case[2]})

    sends = [case for wave in waves for case in wave]
    responses = send_waves(send, waves)  # each wave at once: TorchServe batches it together
    want = in_process(local, good, "application/json")
    for (case, _, _, words), resp in zip(sends, responses, strict=True):
        if words is None:
            assert resp.status_code == 200 and resp.json() == want, resp.text
        else:
            assert resp.status_code == 400, (case, resp.text)
            assert all(w in resp.json()["error"] for w in words), (case, resp.json())
    assert "Worker disconnected" not in server.logs("ts_log.log")
