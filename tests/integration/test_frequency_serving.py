"""The frequency archive in a real TorchServe: one-shot JSON and float32 bodies, streams whose
state the client carries (against the whole signal), refusals, and a bad request batched with good
ones."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.settings import parse_settings
from handlers.kits.signal.codec import STATE_HEADER, SignalRequest
from handlers.manifest import read_manifest
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal

PATH = "/predictions/frequency"
RAW = "application/octet-stream"


pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(served):
    """The session's one TorchServe (tests/fixtures/served.py), which serves the frequency archive."""
    assert "frequency" in served.models
    return served


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
    assert body["out_of_distribution"] is False and 0 <= body["residual"] < 0.2
    for c in body["components"]:
        assert len(c["signal"]) == len(c["std"]) == signal.size
        assert min(c["std"]) >= 0 and max(c["std"]) > 0
    # The served answer is the in-process engine's answer.
    manifest = read_manifest(frequency_artifacts)
    engine = FrequencyEngine(
        parse_settings(manifest, {"runtime": "onnx"}),
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


def test_white_noise_is_flagged_out_of_distribution_in_json_and_float32(server):
    noise = np.random.default_rng(7).normal(0.0, 1.0, 2000).astype(np.float32)
    body = server.post(PATH, json={"signal": noise.tolist(), "frequencies": [1]}).json()
    assert body["out_of_distribution"] is True and body["residual"] > 0.9
    resp = server.post(
        PATH,
        data=noise.astype("<f4").tobytes(),
        headers={"Content-Type": RAW, "Accept": RAW, "X-Frequencies": "1"},
    )
    assert resp.status_code == 200 and resp.headers["X-Out-Of-Distribution"] == "true"
    assert float(resp.headers["X-Residual"]) > 0.9


def test_query_string_does_not_reach_the_handler_in_torchserve_0_12(server, signal):
    # Measured: the /predictions route hands the worker no query parameters (a null decoder in
    # InferenceRequestHandler), so a raw body's parameters must travel in headers.
    raw = signal[:200].astype("<f4").tobytes()
    resp = server.post(
        f"{PATH}?frequencies=5", data=raw, headers={"Content-Type": "application/octet-stream"}
    )
    assert [c["frequency"] for c in resp.json()["components"]] == [1.0, 3.0, 5.0, 7.0]


def stream(servers, chunks, frequencies=(1, 7), binary=False):
    """Send chunks as one stream, chunk k to servers[k % len(servers)], carrying the state."""
    out, state, seen = [], None, 0
    for k, chunk in enumerate(chunks):
        server = servers[k % len(servers)]
        if binary:
            headers = {"Content-Type": RAW, "Accept": RAW}
            headers |= {STATE_HEADER: state} if state else {
                "X-Stream": "start", "X-Frequencies": ",".join(map(str, frequencies))
            }  # fmt: skip
            resp = server.post(PATH, data=chunk.astype("<f4").tobytes(), headers=headers)
            assert resp.status_code == 200, resp.text
            shape = tuple(int(d) for d in resp.headers["X-Shape"].split(","))
            out.append(np.frombuffer(resp.content, "<f4").reshape(shape)[0])
        else:
            body = {"signal": chunk.tolist()}
            body |= (
                {"state": state} if state else {"stream": True, "frequencies": list(frequencies)}
            )
            resp = server.post(PATH, json=body)
            out.append(components(resp))
            assert resp.json()["state"] == resp.headers[STATE_HEADER]
            assert resp.json()["samples_seen"] == seen + chunk.size
        seen += chunk.size
        state = resp.headers[STATE_HEADER]
        assert int(resp.headers["X-Samples-Seen"]) == seen
    return np.concatenate(out, axis=1), state


def test_streaming_in_chunks_equals_sending_the_signal_whole(server, signal):
    whole, _ = stream([server], [signal])
    parts, _ = stream([server], np.array_split(signal, [1, 333, 334, 1500]))
    diff = float(np.abs(parts - whole).max())
    print(f"streaming parity: max |chunked - whole| = {diff:.2e}")
    assert diff <= 1e-5
    as_floats, _ = stream([server], np.array_split(signal, 3), binary=True)
    assert float(np.abs(as_floats - whole).max()) <= 1e-5


def test_bad_or_altered_state_is_a_400_and_changing_frequencies_is_a_400(server, signal):
    _, state = stream([server], [signal[:100]], frequencies=(1,))
    for bad, words in [
        (state[:-8], "wrong size"),
        (state[:40] + ("A" if state[40] != "A" else "B") + state[41:], "altered"),
        ("not base64!", "not decodable"),
    ]:
        resp = server.post(PATH, json={"signal": [0.1], "state": bad})
        assert resp.status_code == 400 and words in resp.json()["error"], resp.text
    switch = server.post(PATH, json={"signal": [0.1], "frequencies": [3], "state": state})
    assert switch.status_code == 400 and "cannot change" in switch.json()["error"]
    header = server.post(
        PATH, data=b"\0\0\0\0", headers={"Content-Type": RAW, STATE_HEADER: "bad state \u00e9"}
    )
    assert header.status_code == 400 and header.json()["kind"] == "bad_state"


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


def test_a_default_model_sized_state_header_reaches_the_handler(server):
    # The default model (2 x 64 LSTM, four frequencies) makes the largest tokens: TorchServe's HTTP
    # decoder must pass a header that long (this tiny model then refuses it as the wrong size).
    from handlers.frequency.state import StateCodec

    longest = StateCodec(b"k" * 32, "2026.11.26-000000-abcdef0", 2, 64, 4).max_chars
    resp = server.post(
        PATH, data=b"\0\0\0\0", headers={"Content-Type": RAW, STATE_HEADER: "A" * longest}
    )
    print(f"default-model state header: {longest} characters -> {resp.status_code}")
    assert resp.status_code == 400 and "wrong size" in resp.json()["error"], resp.text


def test_without_the_band_the_served_answer_is_the_signals_alone_and_half_the_size(server, signal):
    """`band: false` (JSON, REST) and `X-Band: false` (float32): the same signal floats as the
    default answer, no std, about half the bytes; a bad value is the catalogue's 400."""
    ask = {"signal": signal.tolist(), "frequencies": [1, 3]}
    full = server.post(PATH, json=ask)
    half = server.post(PATH, json=ask | {"band": False})
    assert full.status_code == half.status_code == 200, half.text
    assert all(set(c) == {"frequency", "signal"} for c in half.json()["components"])
    np.testing.assert_array_equal(components(half), components(full))
    assert len(half.content) < 0.6 * len(full.content)
    raw = signal.astype("<f4").tobytes()
    headers = {"Content-Type": RAW, "Accept": RAW, "X-Frequencies": "1,3"}
    full_f = server.post(PATH, data=raw, headers=headers)
    half_f = server.post(PATH, data=raw, headers=headers | {"X-Band": "false"})
    assert half_f.status_code == 200 and half_f.headers["X-Shape"] == f"1,2,{signal.size}"
    assert half_f.content == full_f.content[: len(full_f.content) // 2]
    for resp in (
        server.post(PATH, json=ask | {"band": "no"}),
        server.post(PATH, data=raw, headers=headers | {"X-Band": "no"}),
    ):
        assert resp.status_code == 400 and resp.json()["kind"] == "bad_field", resp.text
        assert "band" in resp.json()["error"].lower()
