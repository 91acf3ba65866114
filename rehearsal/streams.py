"""Frequency streams through the balancer, with the state travelling with the client.

The protocol is the stateless stream of the frequency stream work (not in this branch's handler
yet): the first chunk is `{"signal": [...], "sample_rate": 1000, "frequencies": [...],
"stream": true}`, each answer carries `"state": "..."`, and the next chunk sends that state back.
No replica keeps anything, so consecutive chunks may land on either replica. `make rehearse
REHEARSE_ARGS=--frequency-streams` runs this once the frequency archive speaks that protocol.
"""

from __future__ import annotations

import math

import requests


def chunk(start: int, n: int, sample_rate: int, hz: float = 5.0) -> list[float]:
    return [math.sin(2 * math.pi * hz * (start + i) / sample_rate) for i in range(n)]


def frequency_streams(
    http: str,
    token: str,
    streams: int = 4,
    chunks: int = 8,
    samples: int = 250,
    sample_rate: int = 1000,
    frequencies: tuple[float, ...] = (5.0,),
) -> dict:
    """Send `streams` streams of `chunks` chunks each through the balancer at `http`.

    Returns {"chunks": n, "failed": [...], "replicas": {replica: chunks answered},
    "streams_on_both": how many streams had chunks answered by more than one replica}."""
    headers = {"Authorization": f"Bearer {token}"}
    failed, replicas, spread = [], {}, 0
    for s in range(streams):
        state, seen = None, set()
        for c in range(chunks):
            body = {"signal": chunk(c * samples, samples, sample_rate), "stream": True}
            if state is None:
                body |= {"sample_rate": sample_rate, "frequencies": list(frequencies)}
            else:
                body["state"] = state
            r = requests.post(
                f"{http}/predictions/frequency", json=body, headers=headers, timeout=30
            )
            replica = r.headers.get("X-Replica")
            if r.status_code != 200 or "state" not in r.json():
                failed.append(
                    {"stream": s, "chunk": c, "status": r.status_code, "body": r.text[:200]}
                )
                break
            state = r.json()["state"]
            seen.add(replica)
            replicas[replica] = replicas.get(replica, 0) + 1
        spread += len(seen) > 1
    return {
        "chunks": sum(replicas.values()),
        "failed": failed,
        "replicas": replicas,
        "streams_on_both": spread,
    }
