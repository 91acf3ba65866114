"""A frequency stream across two Open Inference Protocol replicas: two OIP servers that share
nothing but the stream-signing key (own ports, TMPDIR, token, unpacked archive; each its own copy
of the key, as each pod mounts the Secret). A stream whose chunks alternate between them answers,
chunk by chunk, exactly what one server answers throughout, and a replica signing with another key
refuses the state with ABORTED (`stale_state`, TorchServe's 409: the catalogue's gRPC code)."""

from __future__ import annotations

import base64
import json
import secrets

import numpy as np
import pytest

from handlers.frequency.state import KEY_FILE_ENV
from tests.fixtures.oip import start_oip
from tests.support.oip_client import pack, unpack

pytestmark = pytest.mark.integration

CHUNKS = 4
CHUNK = 64


@pytest.fixture(scope="module")
def replicas(frequency_archive, tmp_path_factory):
    key = secrets.token_urlsafe(32)
    started = []
    try:
        for name in ("oip-replica-a", "oip-replica-b"):
            work = tmp_path_factory.mktemp(name)
            (work / "state.key").write_text(key)
            started.append(
                start_oip(work, [frequency_archive], env={KEY_FILE_ENV: str(work / "state.key")})
            )
        yield started
    finally:
        for server in started:
            server.stop()


def chunk_call(chunk: np.ndarray, state: str | None, transport: str) -> dict:
    """A stream's chunk: the first starts the stream, the others carry the state (as the
    `state` parameter over gRPC, as the BYTES input `state` over REST)."""
    inputs = [{"name": "signal", "datatype": "FP32", "array": pack(chunk)}]
    parameters: dict = {}
    if state is None:
        parameters["stream"] = True
    elif transport == "grpc":
        parameters["state"] = state
    else:
        state_input = np.array([state.encode()], dtype=object)
        inputs.append({"name": "state", "datatype": "BYTES", "array": pack(state_input)})
    return {
        "transport": transport,
        "binary": True,
        "model": "frequency",
        "parameters": parameters or None,
        "inputs": inputs,
    }


def run_stream(servers, signal: np.ndarray) -> list[dict]:
    """Send the chunks in turn to servers[i % len(servers)], alternating the transport; each
    answer's arrays (state as text)."""
    answers, state = [], None
    for i in range(CHUNKS):
        server = servers[i % len(servers)]
        transport = ("grpc", "http")[i % 2]
        chunk = signal[i * CHUNK : (i + 1) * CHUNK]
        [result] = server.run([chunk_call(chunk, state, transport)])
        assert result["error"] is None, (i, result["error"])
        got = {n: unpack(a) for n, a in result["outputs"].items()}
        state = base64.b64decode(got["state"][0]).decode()
        answers.append(got)
    return answers


def test_the_replicas_share_nothing_but_the_key(replicas):
    a, b = replicas
    assert {a.http, a.grpc}.isdisjoint({b.http, b.grpc})
    assert a.token != b.token and a.log.parent != b.log.parent


def test_a_stream_alternating_between_replicas_equals_one_replica_throughout(replicas):
    a, b = replicas
    t = np.arange(CHUNKS * CHUNK)
    rng = np.random.default_rng(3)
    signal = (np.sin(2 * np.pi * t / 16) + rng.normal(0, 0.2, t.size)).astype(np.float32)
    alone = run_stream([a], signal)
    across = run_stream([a, b], signal)
    for i, (one, two) in enumerate(zip(alone, across, strict=True)):
        assert int(two["samples_seen"][0]) == (i + 1) * CHUNK
        assert sorted(one) == sorted(two), i
        for name in one:
            if name == "state":  # its text is compared by what it continues into
                continue
            assert one[name].dtype == two[name].dtype, (i, name)
            assert one[name].tobytes() == two[name].tobytes(), (i, name)


def test_a_replica_with_another_key_refuses_the_state_as_stale(replicas, oip_server):
    """The session's OIP server signs with a key of its own (generated in its TMPDIR)."""
    a, _ = replicas
    signal = np.sin(np.arange(2 * CHUNK) / 3).astype(np.float32)
    [first] = a.run([chunk_call(signal[:CHUNK], None, "grpc")])
    state = base64.b64decode(unpack(first["outputs"]["state"])[0]).decode()
    grpc, rest = oip_server.run(
        [chunk_call(signal[CHUNK:], state, "grpc"), chunk_call(signal[CHUNK:], state, "http")]
    )
    assert grpc["error"]["status"] == "StatusCode.ABORTED", grpc
    assert json.loads(grpc["error"]["message"])["kind"] == "stale_state"
    assert rest["error"]["status"] == "409", rest
