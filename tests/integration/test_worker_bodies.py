"""Workers get each body as the client sent it (config.properties: decode_input_request=false) and
the handlers' codec parses JSON once: bad JSON is a 400 with its reason and leaves nothing in the
worker's log, where TorchServe's own decoding logged a traceback for every such body first."""

from __future__ import annotations

import psutil

from deploy.ts_files import read_properties
from tests.support.torchserve import ROOT

TS_WARNING = "Failed json decoding of input data"


def worker_environments(server) -> list[dict[str, str]]:
    return [
        p.environ()
        for p in psutil.Process(server.process.pid).children(recursive=True)
        if any("model_service_worker" in part for part in p.cmdline())
    ]


def test_workers_parse_json_bodies_themselves(served):
    assert read_properties(ROOT / "config.properties")["decode_input_request"] == "false"
    envs = worker_environments(served.server)
    assert envs and all(env.get("TS_DECODE_INPUT_REQUEST") == "false" for env in envs)

    json_type = {"Content-Type": "application/json"}
    bad = served.post("/predictions/sentiment", data=b'{"text": "a fine film", ', headers=json_type)
    assert bad.status_code == 400, bad.text
    assert "not valid JSON" in bad.json()["error"], bad.text
    good = served.post("/predictions/sentiment", data=b'{"text": "a fine film"}', headers=json_type)
    assert good.status_code == 200, good.text
    assert TS_WARNING not in served.logs("model_log.log")
