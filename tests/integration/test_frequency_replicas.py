"""Two TorchServe replicas that share nothing but the stream-signing key (own folder, ports,
TMPDIR, initial_worker_port, TorchServe key_file.json, a copy of the signing key): a stream whose
chunks alternate between them equals the whole signal, and a replica signing with another key
refuses the state with 409."""

from __future__ import annotations

import secrets

import numpy as np
import pytest

from handlers.frequency.state import KEY_FILE_ENV
from tests.integration import test_frequency_serving as serving
from tests.integration.test_frequency_serving import PATH, stream
from tests.support.torchserve import start_torchserve
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal

server = serving.server
"""A third server, with the key it generated in its own TMPDIR (the fixture of that module)."""


@pytest.fixture(scope="module")
def replicas(frequency_archive, tmp_path_factory):
    key = secrets.token_urlsafe(32)
    started = []
    try:
        for name in ("replica-a", "replica-b"):
            tmp = tmp_path_factory.mktemp(name)
            (tmp / "state.key").write_text(key)  # each its own copy, as each pod mounts the Secret
            started.append(
                start_torchserve(
                    tmp,
                    {"frequency": frequency_archive},
                    env={KEY_FILE_ENV: str(tmp / "state.key")},
                )
            )
        yield started
    finally:
        for ts in started:
            ts.stop()


def test_the_replicas_share_nothing(replicas):
    a, b = replicas
    assert not set(a.ports.values()) & set(b.ports.values())
    assert a.workdir != b.workdir and a.keys["inference"] != b.keys["inference"]
    worker_ports = [
        next(
            line
            for line in (ts.workdir / "config.properties").read_text().splitlines()
            if line.startswith("initial_worker_port")
        )
        for ts in replicas
    ]
    assert worker_ports[0] != worker_ports[1]
    assert a.env[KEY_FILE_ENV] != b.env[KEY_FILE_ENV]


@pytest.mark.parametrize("binary", [False, True], ids=["json", "float32"])
def test_chunks_alternating_between_replicas_equal_the_whole_signal(replicas, binary):
    signal = make_signal(CONFIGS["tiny"].signal, seed=11).mixed  # 2 s at 1 kHz
    whole, _ = stream(replicas[:1], [signal], frequencies=(1, 3, 5, 7))
    chunks = np.array_split(signal, [1, 250, 251, 900, 1300, 1700])
    parts, _ = stream(replicas, chunks, frequencies=(1, 3, 5, 7), binary=binary)
    diff = float(np.abs(parts - whole).max())
    print(
        f"two-replica parity ({'float32' if binary else 'JSON'}): max |alternating - whole| = {diff:.2e}"
    )
    assert diff <= 1e-5


def test_a_replica_with_another_signing_key_answers_409(replicas, server):
    _, state = stream(replicas[:1], [make_signal(CONFIGS["tiny"].signal, seed=12).mixed[:200]])
    resp = server.post(PATH, json={"signal": [0.1], "state": state})
    assert resp.status_code == 409, resp.text
    assert resp.json()["kind"] == "stale_state" and "restart the stream" in resp.json()["error"]
