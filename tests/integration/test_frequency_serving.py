"""The frequency archive in a real TorchServe: one-shot JSON and float32 bodies, streaming in
chunks against the whole signal, refusals, and a bad request batched with good ones."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from handlers.frequency.codec import SignalRequest
from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.settings import FrequencySettings
from tests.support.torchserve import start_torchserve
from training.common.manifest import read_manifest
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal

PATH = "/predictions/frequency"


@pytest.fixture(scope="module")
def server(frequency_archive, tmp_path_factory):
    ts = start_torchserve(
        tmp_path_factory.mktemp("frequency-serve"), {"frequency": frequency_archive}
    )
    yield ts
    ts.stop()


@pytest.fixture(scope="module")
def signal() -> np.ndarray:
    return make_signal(CONFIGS["tiny"].signal, seed=2).mixed  # 2 s at 1 kHz


def components(resp) -> np.ndarray:
    assert resp.status_code == 200, resp.text
    return np.array([c["signal"] for c in resp.json()["components"]])


def test_json_request_returns_components_with_std_and_version(server, signal, frequency_artifacts):
    resp = server.post(
        PATH, json={"signal": signal.tolist(), "sample_rate": 1000, "frequencies": [1, 3]}
    )
    body = resp.json()
    assert resp.status_code == 200, body
    assert body["sample_rate"] == 1000
    assert body["model"] == {
        "name": "frequency",
        "version": read_manifest(frequency_artifacts)["version"],
    }
    assert [c["frequency"] for c in body["components"]] == [1.0, 3.0]
    for c in body["components"]:
        assert len(c["signal"]) == len(c["std"]) == signal.size
        assert min(c["std"]) >= 0 and max(c["std"]) > 0
    # The served answer is the in-process engine's answer.
    manifest = read_manifest(frequency_artifacts)
    engine = FrequencyEngine(
        FrequencySettings.from_sources({"runtime": "onnx"}, manifest["handler"]),
        frequency_artifacts,
    )
    want = engine.windows([SignalRequest(signal, 1000, (1.0, 3.0), (0, 1))])[0]
    np.testing.assert_allclose(components(resp), want.signal, atol=1e-4)


def test_raw_float32_body_with_header_parameters_matches_json(server, signal):
    raw = signal.astype("<f4").tobytes()
    headers = {
        "Content-Type": "application/octet-stream",
        "X-Sample-Rate": "1000",
        "X-Frequencies": "5,7",
    }
    by_header = server.post(PATH, data=raw, headers=headers)
    as_json = server.post(PATH, json={"signal": signal.tolist(), "frequencies": [5, 7]})
    np.testing.assert_allclose(components(by_header), components(as_json), atol=1e-6)


def test_query_string_does_not_reach_the_handler_in_torchserve_0_12(server, signal):
    # Measured: the /predictions route hands the worker no query parameters (a null decoder in
    # InferenceRequestHandler), so a raw body's parameters must travel in headers.
    raw = signal[:200].astype("<f4").tobytes()
    resp = server.post(
        f"{PATH}?frequencies=5", data=raw, headers={"Content-Type": "application/octet-stream"}
    )
    assert [c["frequency"] for c in resp.json()["components"]] == [1.0, 3.0, 5.0, 7.0]


def stream(server, chunks, sequence_id, frequencies=(1, 7)):
    out = []
    for k, chunk in enumerate(chunks):
        headers = {"ts_request_sequence_id": sequence_id}
        if k == 0:
            headers["ts_request_sequence_start"] = "true"
        if k == len(chunks) - 1:
            headers["ts_request_sequence_end"] = "true"
        resp = server.post(
            PATH, json={"signal": chunk.tolist(), "frequencies": list(frequencies)}, headers=headers
        )
        out.append(components(resp))
        assert resp.json()["sequence"]["id"] == sequence_id
        assert resp.headers["ts_request_sequence_id"] == sequence_id
    return np.concatenate(out, axis=1), resp.json()["sequence"]


def test_streaming_in_chunks_equals_sending_the_signal_whole(server, signal):
    whole, _ = stream(server, [signal], "whole-1")
    parts, seq = stream(server, np.array_split(signal, [1, 333, 334, 1500]), "chunked-1")
    assert seq == {"id": "chunked-1", "samples_seen": signal.size, "closed": True}
    diff = float(np.abs(parts - whole).max())
    print(f"streaming parity: max |chunked - whole| = {diff:.2e}")
    assert diff <= 1e-5


def test_closed_or_unknown_stream_is_refused_and_changing_frequencies_is_a_400(server, signal):
    stream(server, [signal[:100]], "closed-1")
    again = server.post(
        PATH, json={"signal": [0.1]}, headers={"ts_request_sequence_id": "closed-1"}
    )
    assert again.status_code == 404 and "not open" in again.json()["error"]
    start = {"ts_request_sequence_id": "switch-1", "ts_request_sequence_start": "true"}
    assert (
        server.post(PATH, json={"signal": [0.1], "frequencies": [1]}, headers=start).status_code
        == 200
    )
    switch = server.post(
        PATH,
        json={"signal": [0.1], "frequencies": [3]},
        headers={"ts_request_sequence_id": "switch-1"},
    )
    assert switch.status_code == 400 and "cannot change" in switch.json()["error"]


def test_signal_shorter_than_a_window_is_padded_not_refused(server):
    resp = server.post(PATH, json={"signal": [0.1, 0.2, 0.3]})
    assert components(resp).shape == (4, 3)


BAD = [
    ('{"signal": [0.1, NaN]}', "application/json", "NaN"),
    ('{"signal": [0.1, Infinity]}', "application/json", "infinite"),
    ('{"signal": [0.1, "a"]}', "application/json", "only numbers"),
    ('{"signal": []}', "application/json", "empty"),
    ('{"signal": [0.1], "sample_rate": 8000}', "application/json", "sample_rate"),
    ('{"signal": [0.1], "frequencies": [2]}', "application/json", "unsupported frequency"),
    (json.dumps({"signal": [0.0] * 20001}), "application/json", "limit"),
    ("\x00\x00\x80", "application/octet-stream", "multiple of 4"),
]


@pytest.mark.parametrize("body,ctype,words", BAD, ids=[b[2] for b in BAD])
def test_bad_input_gets_400_with_a_json_reason(server, body, ctype, words):
    resp = server.post(PATH, data=body.encode("latin-1"), headers={"Content-Type": ctype})
    assert resp.status_code == 400, resp.text
    assert words in resp.json()["error"]


def test_bad_request_batched_with_good_ones_fails_alone(server, signal):
    good = json.dumps({"signal": signal[:500].tolist(), "frequencies": [3]})
    bad = '{"signal": [1.0, NaN]}'
    bodies = [good, good, bad, good, good, good]
    for _ in range(5):  # requests within maxBatchDelay share a batch; retry until they did
        with ThreadPoolExecutor(len(bodies)) as pool:
            resps = list(
                pool.map(
                    lambda b: server.post(
                        PATH, data=b, headers={"Content-Type": "application/json"}
                    ),
                    bodies,
                )
            )
        if max(int(r.headers.get("x-batch-size", 1)) for r in resps) > 1:
            break
    assert max(int(r.headers.get("x-batch-size", 1)) for r in resps) > 1, (
        "requests were never batched"
    )
    assert [r.status_code for r in resps] == [200, 200, 400, 200, 200, 200]
    first = components(resps[0])
    for r in resps[1:2] + resps[3:]:
        np.testing.assert_allclose(components(r), first, atol=1e-6)
