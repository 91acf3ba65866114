"""The REST and gRPC clients against a real TorchServe: same answers, same errors, auth refused.

Most tests share the session's `served` TorchServe (tiny archives of every model). Rotating a key
would break other tests' cached keys there, so the token tests start a model-less TorchServe of
their own (seconds: no worker to load).
"""

from __future__ import annotations

import json
import math
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import requests

from clients import (
    PROTOCOLS,
    AuthError,
    BadRequest,
    ClientSettings,
    Conflict,
    ModelNotFound,
    connect,
)
from clients.tokens import ENV_VARS, TokenSource
from handlers.frequency.state import StateCodec, StreamState
from tests.support.torchserve import ROOT, start_torchserve
from tools.frequency.client import SignalStream, extract
from tools.frequency.samples import synthetic_signal

pytestmark = pytest.mark.integration


def settings_for(server) -> ClientSettings:
    return server.client_settings(timeout=60)


@pytest.fixture(scope="module")
def clients(served):
    opened = {p: connect(p, settings_for(served)) for p in PROTOCOLS}
    yield opened
    for c in opened.values():
        c.close()


@pytest.fixture(autouse=True)
def _no_key_env(monkeypatch):
    for var in ENV_VARS.values():
        monkeypatch.delenv(var, raising=False)


def assert_close(a, b, path="answer"):
    """Equal JSON, floats within 1e-5: both protocols reach the same handler with the same bytes."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(a)} != {sorted(b)}"
        for k in a:
            assert_close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert len(a) == len(b), f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_close(x, y, f"{path}[{i}]")
    elif isinstance(a, float):
        assert math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6), f"{path}: {a} != {b}"
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


SAME_INPUTS = {
    "sentiment_text": ("sentiment", {"text": "A warm, funny and beautifully acted film."}),
    "sentiment_texts": (
        "sentiment",
        {"texts": ["Dreadful and dull.", "I loved every minute of it."]},
    ),
    "sentiment_plain": ("sentiment", "An utterly forgettable sequel."),
    "frequency": (
        "frequency",
        {
            "signal": synthetic_signal(300, seed=3).round(5).tolist(),
            "sample_rate": 1000,
            "frequencies": [1, 3],
        },
    ),
}


@pytest.mark.parametrize("case", sorted(SAME_INPUTS))
def test_rest_and_grpc_return_the_same_answer(clients, case):
    model, payload = SAME_INPUTS[case]
    rest = clients["rest"].predict(model, payload)
    grpc = clients["grpc"].predict(model, payload)
    assert isinstance(rest, dict | list) and rest, f"empty answer: {rest!r}"
    assert_close(rest, grpc)


def test_health_and_model_list_agree_over_both_protocols(clients):
    for client in clients.values():
        assert client.health() == {"status": "Healthy"}
    models = clients["rest"].list_models()
    assert {"sentiment", "frequency"} <= set(models)
    assert clients["grpc"].list_models() == models


BAD_INPUTS = {
    "empty_text": ("sentiment", {"text": "   "}),
    "texts_not_a_list": ("sentiment", {"texts": "just one string"}),
    "no_text_field": ("sentiment", {"review": "no such field"}),
    "not_json_object": ("sentiment", [1, 2, 3]),
    "empty_signal": ("frequency", {"signal": [], "sample_rate": 1000}),
    "wrong_sample_rate": ("frequency", {"signal": [0.1, 0.2, 0.3], "sample_rate": 44100}),
    "unknown_frequency": ("frequency", {"signal": [0.1, 0.2, 0.3], "frequencies": [2.5]}),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_raises_the_same_typed_error_over_both_protocols(clients, case):
    model, payload = BAD_INPUTS[case]
    errors = {}
    for protocol, client in clients.items():
        with pytest.raises(BadRequest) as info:
            client.predict(model, payload)
        errors[protocol] = info.value
    rest, grpc = errors["rest"], errors["grpc"]
    assert rest.status == grpc.status == 400
    assert rest.reason and rest.reason == grpc.reason
    assert rest.kind == grpc.kind


def test_unknown_model_is_model_not_found_over_both_protocols(clients):
    reasons = set()
    for client in clients.values():
        with pytest.raises(ModelNotFound) as info:
            client.predict("no_such_model", {"text": "hello"})
        reasons.add(info.value.reason)
    assert len(reasons) == 1 and "no_such_model" in reasons.pop()


def test_bad_request_marked_in_a_batch_raises_over_grpc_and_spares_its_neighbours(clients):
    """The handler marks one request of a batch 400; over gRPC that one still comes back with status
    OK and the error JSON as its body: the client must raise for it and answer the others."""
    grpc = clients["grpc"]
    good = {"text": "Wonderful cast, sharp script."}
    bad = {"text": ""}

    def call(payload):
        try:
            return grpc.predict("sentiment", payload)
        except BadRequest as e:
            return e

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(call, [good, bad, good, bad, good, good]))
    for payload, result in zip([good, bad, good, bad, good, good], results, strict=True):
        if payload is bad:
            assert isinstance(result, BadRequest) and result.kind, result
        else:
            assert isinstance(result, dict) and "label" in result, result


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "keys", [None, {"inference": "wrong-key", "management": "wrong-key"}], ids=["missing", "wrong"]
)
def test_missing_or_wrong_token_is_refused(served, protocol, keys):
    # No key file to fall back on: the refusal must surface, not be papered over by a refresh.
    settings = settings_for(served)
    tokens = TokenSource(key_file=None, keys=keys)
    with connect(protocol, settings, tokens) as client:
        for call in (
            lambda: client.predict("sentiment", {"text": "fine"}),
            client.health,
            client.list_models,
        ):
            with pytest.raises(AuthError) as info:
                call()
            assert "Token" in info.value.reason


def test_cli_predicts_over_grpc_and_reports_bad_input_with_exit_status_2(served):
    config = Path(served.workdir) / "config.properties"
    base = [sys.executable, "-m", "clients", "predict"]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    ok = subprocess.run(
        [*base, "sentiment", "--text", "What a film!", "--protocol", "grpc", "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert ok.returncode == 0, ok.stderr
    assert "label" in json.loads(ok.stdout)
    bad = subprocess.run(
        [*base, "frequency", "--signal", "0.1,0.2", "--sample-rate", "8000", "--config", str(config)],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert bad.returncode == 2, bad.stdout
    assert "400 BadRequest" in bad.stderr and "sample_rate" in bad.stderr


def test_cli_predicts_digits_from_a_png_file_a_grid_and_an_upload(served, tmp_path):
    """tools/digits/cli.py: --image (base64 in JSON, here over gRPC), --grid (REST) and --upload
    (the file's bytes as the body) reach the same model and agree on the label."""
    from tools.digits.samples import EXAMPLE, binary_example

    assert "digits" in served.models  # the shared server serves every registered model
    png = tmp_path / "zero.png"
    png.write_bytes(binary_example()[0])
    config = Path(served.workdir) / "config.properties"
    base = [sys.executable, "-m", "clients", "predict", "digits", "--config", str(config)]
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    answers = []
    for extra in (
        ["--image", str(png), "--protocol", "grpc"],
        ["--grid", json.dumps(EXAMPLE["image"])],
        ["--image", str(png), "--upload"],
    ):
        run = subprocess.run(
            [*base, *extra], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
        )
        assert run.returncode == 0, (extra, run.stderr)
        answers.append(json.loads(run.stdout))
    assert all(set(a["probabilities"]) == set(answers[0]["probabilities"]) for a in answers)
    assert len({a["label"] for a in answers}) == 1


# --- frequency streams: the state travels with the client, over either protocol ---------------

STREAM_SIGNAL = synthetic_signal(1500, seed=4)


def whole_stream(client, frequencies=(1, 3)) -> np.ndarray:
    return SignalStream(client, frequencies).send(STREAM_SIGNAL).signal


def test_a_stream_continues_across_protocols_and_equals_the_whole_signal(clients):
    whole = whole_stream(clients["rest"])
    stream = SignalStream(clients["rest"], frequencies=(1, 3))
    parts = []
    for k, chunk in enumerate(np.array_split(STREAM_SIGNAL, 5)):
        stream.client = clients[PROTOCOLS[k % 2]]  # REST, gRPC, REST, ...: the state is just data
        answer = stream.send(chunk)
        parts.append(answer.signal)
    assert answer.samples_seen == STREAM_SIGNAL.size and answer.frequencies == (1.0, 3.0)
    assert float(np.abs(np.concatenate(parts, axis=1) - whole).max()) <= 1e-5


def test_float32_stream_and_one_shot_match_json_over_rest(clients):
    rest = clients["rest"]
    whole = whole_stream(rest)
    stream = SignalStream(rest, frequencies=(1, 3), float32=True)
    parts = [stream.send(c).signal for c in np.array_split(STREAM_SIGNAL, 3)]
    assert float(np.abs(np.concatenate(parts, axis=1) - whole).max()) <= 1e-5
    one_shot = extract(rest, STREAM_SIGNAL, (1, 3), float32=True)
    as_json = extract(rest, STREAM_SIGNAL, (1, 3))
    np.testing.assert_allclose(one_shot.signal, as_json.signal, atol=1e-6)
    np.testing.assert_allclose(one_shot.std, as_json.std, atol=1e-6)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_state_from_another_signing_key_is_a_conflict_over_both_protocols(
    served, clients, protocol
):
    manifest = json.loads((served.artifacts["frequency"] / "manifest.json").read_text())
    h = manifest["handler"]
    codec = StateCodec(
        b"not-this-servers-key-" * 2, manifest["version"], h["layers"], h["hidden"], 4
    )
    zero = np.zeros((h["layers"], 1, h["hidden"]), np.float32)
    forged = codec.encode(StreamState(zero, zero, (1.0,), (0,)))
    with pytest.raises(Conflict) as info:
        SignalStream(clients[protocol], state=forged).send([0.1, 0.2])
    assert info.value.status == 409 and "restart the stream" in info.value.reason


def test_cli_streams_stdin_and_files_carrying_the_state(served, tmp_path):
    config = Path(served.workdir) / "config.properties"
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    base = [sys.executable, "-m", "clients", "stream", "frequency", "--config", str(config)]
    base += ["--chunk", "400", "--frequencies", "1,3"]
    text = "\n".join(f"{x:.9g}" for x in STREAM_SIGNAL)
    over_grpc = subprocess.run(
        [*base, "--protocol", "grpc"], input=text, capture_output=True, text=True, env=env,
        timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert over_grpc.returncode == 0, over_grpc.stderr
    lines = [json.loads(line) for line in over_grpc.stdout.splitlines()]
    assert [a["samples_seen"] for a in lines] == [400, 800, 1200, 1500]
    got = np.concatenate([[c["signal"] for c in a["components"]] for a in lines], axis=1)
    with connect("rest", settings_for(served)) as rest:
        whole = whole_stream(rest)
    assert float(np.abs(got - whole).max()) <= 1e-5
    # float32 file over REST, in two runs: the second resumes from the saved state.
    f32 = tmp_path / "signal.f32"
    state = tmp_path / "state"
    halves = []
    for part in np.array_split(STREAM_SIGNAL.astype("<f4"), [800]):
        f32.write_bytes(part.tobytes())
        run = subprocess.run(
            [*base, "--input", str(f32), "--input-format", "f32", "--float32", "--state-file", str(state)],
            capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
        )  # fmt: skip
        assert run.returncode == 0, run.stderr
        halves += [json.loads(line) for line in run.stdout.splitlines()]
    assert halves[-1]["samples_seen"] == STREAM_SIGNAL.size and state.read_text()
    got = np.concatenate([[c["signal"] for c in a["components"]] for a in halves], axis=1)
    assert float(np.abs(got - whole).max()) <= 1e-5


# --- token expiry and rotation, on a TorchServe of our own --------------------------------------


def _listening(target: str) -> bool:
    host, port = target.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


@pytest.fixture(scope="module")
def keyed_server(tmp_path_factory):
    server = start_torchserve(
        tmp_path_factory.mktemp("token-server"), {}, overrides={"load_models": ""}
    )
    # With no model to wait for, the key file can appear before the listeners are bound.
    deadline = time.monotonic() + 60
    targets = [
        server.inference_url,
        server.management_url,
        server.grpc_target,
        server.grpc_management_target,
    ]
    while not all(_listening(t) for t in targets):
        if time.monotonic() > deadline:
            server.stop()
            raise TimeoutError(f"TorchServe did not listen on {targets}:\n{server.tail()}")
        time.sleep(0.2)
    yield server
    server.stop()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_client_recovers_when_its_key_is_rotated_under_it(keyed_server, protocol):
    settings = settings_for(keyed_server)
    with connect(protocol, settings) as client:
        assert client.health() == {"status": "Healthy"}
        stale = client.tokens.get("inference")
        fresh = settings.tokens().rotate("inference")  # another party rotates the key
        assert fresh != stale
        assert (
            requests.get(
                f"{keyed_server.inference_url}/ping",
                headers={"Authorization": f"Bearer {stale}"},
                timeout=10,
            ).status_code
            == 400
        )
        assert client.health() == {"status": "Healthy"}
        assert client.tokens.get("inference") == fresh


def test_refused_key_still_in_the_file_is_replaced_through_the_token_api(keyed_server):
    """An expired key stays in key_file.json; the client mints a new one with the API key."""
    settings = settings_for(keyed_server)
    tokens = settings.tokens()
    current = tokens.get("management")
    fresh = tokens.refresh("management", rejected=current)
    assert fresh and fresh != current
    assert fresh == TokenSource(key_file=settings.key_file).get("management")
    with connect("grpc", settings, tokens) as client:
        assert client.list_models() == []
