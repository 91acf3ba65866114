"""Every answer and refusal the frequency model gives to a fixed set of requests, recorded to the
bit: one-shot signals of several lengths (shorter than a window, one window, many windows, the
longest served), JSON and raw float32 bodies, JSON and float32 answers, chosen frequencies,
streams over several chunks each continuing the state the previous answer returned (chunks
shorter than a block, across blocks, float32 and JSON), explanations (JSON and float32), batches
past the sample budget and the explanation budget, and bad inputs of every kind the kit refuses
(empty, NaN/inf, too long, a float32 body of the wrong length, forged, altered, foreign-key and
other-version states, changed frequencies mid-stream).

Run by tests/unit/test_frequency_answers.py twice: in process over this checkout's handlers/, and
as a script (`python tests/support/frequency_answers.py ARTIFACTS OUT.json`) with PYTHONPATH
naming another checkout's handlers/ (the code at a fixed commit, read with `git archive`). It
imports nothing but `handlers.service` and `handlers.frequency.state` of whichever code is on the
path, and numpy. The stream states are signed with a fixed key (KEY), so they compare too.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

CONFIG = {
    "runtime": "onnx",
    "threads": 1,
    "max_samples": 3000,
    "max_batch_samples": 16000,
    "explain_block": 50,
    "max_explain_samples": 60000,
    "max_batch_explain_samples": 80000,
}
"""The served runtime on one thread, and limits the set reaches with small signals."""
KEY = b"a-fixed-key-so-stream-states-compare"
JSON = {"Content-Type": "application/json"}
RAW = "application/octet-stream"
F32 = {"Content-Type": RAW}
BATCH = 8
"""TorchServe's batchSize for frequency (model-config.yaml)."""


class State:
    """A placeholder: the state the latest answer of stream `name` returned."""

    def __init__(self, name: str, altered: bool = False):
        self.name = name
        self.altered = altered
        """A byte of the signed state flipped (the signature no longer matches)."""


def signal(n: int, seed: int, freqs=(1.0, 3.0, 5.0, 7.0), rate: int = 1000) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(n) / rate
    x = sum(rng.uniform(0.2, 1.0) * np.sin(2 * np.pi * f * t + rng.uniform(0, 6)) for f in freqs)
    return (x + 0.1 * rng.standard_normal(n)).astype(np.float32)


def f32(x: np.ndarray, **headers: str) -> tuple[bytes, dict]:
    return np.asarray(x, "<f4").tobytes(), F32 | headers


def js(x: np.ndarray, **fields: Any) -> dict:
    return {"signal": np.asarray(x, np.float32).tolist()} | fields


def requests(foreign: str, other_version: str) -> list[list[tuple[Any, dict, bool, str | None]]]:
    """Batches of (body, headers, explain, stream name or None). `foreign`: a state signed with
    another key; `other_version`: one signed with KEY by another model version."""
    b: list[list[tuple[Any, dict, bool, str | None]]] = []
    accept = {"Accept": RAW}
    # One-shot: lengths under a window (200), one window, a window + 1, many windows; JSON and
    # float32 in and out; chosen frequencies in any order, repeated, as text.
    lengths = (1, 7, 150, 200, 201, 333, 777, 1500)
    b.append([(js(signal(n, n)), JSON, False, None) for n in lengths])
    b.append([(*f32(signal(n, n + 1), Accept=RAW), False, None) for n in lengths])
    b.append(
        [
            (js(signal(400, 1), frequencies=[3]), JSON, False, None),
            (js(signal(400, 2), frequencies=[7, 1, 7]), JSON, False, None),
            (js(signal(400, 3), frequencies=[5.0], sample_rate=1000), JSON, False, None),
            (js(signal(400, 4)), JSON | accept, False, None),
            (*f32(signal(400, 5), **{"X-Frequencies": "3,1", "X-Sample-Rate": "1000"}), False,
             None),
            (*f32(signal(400, 6), Accept="application/json"), False, None),
            (json.dumps(js(signal(300, 7))).encode(), {"Content-Type": "text/plain"}, False, None),
            (js(signal(3000, 8), frequencies=[1, 3]), JSON, False, None),
        ]
    )  # fmt: skip
    # Streams: opened, then continued chunk after chunk with the returned state, in batches that
    # mix the streams (chunks under a block of 20, across blocks, float32 and JSON).
    b.append(
        [
            (js(signal(50, 10), stream=True), JSON, False, "a"),
            (*f32(signal(64, 11), **{"X-Stream": "start", "X-Frequencies": "5"}), False, "b"),
            (js(signal(7, 12), stream=True, frequencies=[3, 1]), JSON, False, "c"),
            (js(signal(300, 13), stream=True), JSON | accept, False, "d"),
        ]
    )
    for k, n in enumerate((13, 20, 45, 200, 3, 91)):
        b.append(
            [
                (js(signal(n, 100 + k), state=State("a")), JSON, False, "a"),
                (*f32(signal(n + 1, 200 + k), **{"X-Stream-State": State("b")}), False, "b"),
                (js(signal(2 * n, 300 + k), state=State("c"), frequencies=[3, 1]), JSON, False,
                 "c"),
                (js(signal(n, 400 + k), state=State("d")), JSON | accept, False, "d"),
                (js(signal(100, 500 + k)), JSON, False, None),
            ]
        )  # fmt: skip
    # Explanations (occlusion over blocks), beside predictions; JSON and float32.
    b.append(
        [
            (js(signal(300, 20)), JSON, True, None),
            (js(signal(120, 21), frequencies=[1, 5]), JSON, True, None),
            (js(signal(200, 22)), JSON, False, None),
            (*f32(signal(90, 23), **{"X-Frequencies": "7"}, Accept=RAW), True, None),
            (js(signal(10, 24), frequencies=[3]), JSON, True, None),
        ]
    )
    # Budgets: samples x frequencies past the batch's 16,000 (503 + Retry-After for the ones
    # after it), and an explanation batch past its sample-passes.
    b.append([(js(signal(2000, 30 + i)), JSON, False, None) for i in range(4)])
    b.append([(js(signal(600, 40 + i), frequencies=[1, 3]), JSON, True, None) for i in range(3)])
    # Bad inputs of every kind.
    good = signal(100, 50)
    bad: list[tuple[Any, dict, bool, str | None]] = [
        (js(np.zeros(0)), JSON, False, None),
        (b"", F32, False, None),
        (b"", JSON, False, None),
        (b'{"signal": [1.0, NaN, 2.0]}', JSON, False, None),
        (b'{"signal": [1.0, 1e999, 2.0]}', JSON, False, None),
        (b'{"signal": [1.0, 1e39]}', JSON, False, None),
        (b'{"signal": [1, 10000000000000000000000000000000000000000000]}', JSON, False, None),
        (*f32(np.array([1.0, np.nan, 2.0])), False, None),
        (*f32(np.array([np.inf, 0.0])), False, None),
        (js(np.zeros(3001)), JSON, False, None),
        (*f32(np.zeros(3001)), False, None),
        (np.zeros(10, "<f4").tobytes()[:-2], F32, False, None),
        (np.zeros(10, "<f8").tobytes() + b"\0\0", F32, False, None),
        ({"signal": [1, 2, True]}, JSON, False, None),
        ({"signal": ["1", "2"]}, JSON, False, None),
        ({"signal": [[1, 2], [3, 4]]}, JSON, False, None),
        ({"signal": "1,2,3"}, JSON, False, None),
        ({"signal": None}, JSON, False, None),
        ({"samples": [1, 2, 3]}, JSON, False, None),
        ([1, 2, 3], JSON, False, None),
        (b"{not json", JSON, False, None),
        (b"\xff\xfe bad utf-8", JSON, False, None),
        (js(good, frequencies=[2]), JSON, False, None),
        (js(good, frequencies=[]), JSON, False, None),
        (js(good, frequencies="1,3"), JSON, False, None),
        (js(good, frequencies=[1, "3"]), JSON, False, None),
        (js(good, sample_rate=500), JSON, False, None),
        (js(good, sample_rate="1e400"), JSON, False, None),
        (js(good, sample_rate=True), JSON, False, None),
        (*f32(good, **{"X-Frequencies": "1,x"}), False, None),
        (*f32(good, **{"X-Frequencies": "١"}), False, None),
        (*f32(good, **{"X-Sample-Rate": "1_000"}), False, None),
        (*f32(good, **{"X-Stream": "begin"}), False, None),
        (*f32(good, **{"X-Stream": "start", "X-Stream-State": "abc"}), False, None),
        (js(good, stream="yes"), JSON, False, None),
        (js(good, stream=True, state="abc"), JSON, False, None),
        (js(good, state=5), JSON, False, None),
        (js(good, state="abc"), JSON, False, None),
        (js(good, state="!" * 40), JSON, False, None),
        (js(good, state="A" * 100000), JSON, False, None),
        (js(good, state=base64.urlsafe_b64encode(b"XXXX" + b"\0" * 60).decode()), JSON, False,
         None),
        (js(good, state=foreign), JSON, False, None),
        (js(good, state=other_version), JSON, False, None),
        (js(good, state=foreign[:-4] + ("AAAA" if foreign[-4:] != "AAAA" else "BBBB")), JSON,
         False, None),
        (js(good, state=State("a"), frequencies=[1]), JSON, False, None),
        (js(good, state=State("b", altered=True)), JSON, False, None),
        (*f32(good, **{"X-Stream-State": State("d", altered=True)}), False, None),
        (js(good, stream=True), JSON, True, None),
        (js(good, state=State("a")), JSON, True, None),
        (js(signal(3000, 51)), JSON, True, None),
        (js(good), {"Content-Type": "application/json", "Content-Encoding": "br"}, False, None),
        (good.tobytes(), {"Content-Type": "image/png"}, False, None),
    ]  # fmt: skip
    b += [bad[i : i + BATCH] for i in range(0, len(bad), BATCH)]
    return b


def record(result: Any) -> dict:
    """A Reply or a RequestError as plain data, bytes and floats exactly."""
    if hasattr(result, "body"):
        body = result.body if isinstance(result.body, bytes) else str(result.body).encode()
        return {
            "reply": base64.b64encode(body).decode(),
            "content_type": result.content_type,
            "headers": dict(result.headers),
        }
    return {
        "error": type(result).__name__,
        "status": result.status,
        "kind": getattr(result, "kind", None),
        "reason": result.reason,
        "retry_after_s": getattr(result, "retry_after_s", None),
    }


def _resolve(value: Any, states: dict[str, str]) -> Any:
    if isinstance(value, State):
        token = states[value.name]
        if value.altered:
            raw = bytearray(base64.urlsafe_b64decode(token))
            raw[-20] ^= 1
            token = base64.urlsafe_b64encode(bytes(raw)).decode()
        return token
    if isinstance(value, dict):
        return {k: _resolve(v, states) for k, v in value.items()}
    return value


def answers(artifacts: str | Path) -> list[list[dict]]:
    from handlers.frequency.state import KEY_FILE_ENV, StateCodec, StreamState
    from handlers.service import ModelService, Request

    with tempfile.TemporaryDirectory() as tmp:
        key = Path(tmp) / "key"
        key.write_bytes(KEY)
        saved = os.environ.get(KEY_FILE_ENV)
        os.environ[KEY_FILE_ENV] = str(key)
        try:
            service = ModelService.from_dir(artifacts, name="frequency", config=CONFIG)
        finally:
            if saved is None:
                del os.environ[KEY_FILE_ENV]
            else:
                os.environ[KEY_FILE_ENV] = saved
    s = service.settings
    zero = np.zeros((s.layers, 2, s.hidden), np.float32)
    state = StreamState(zero, zero, (1.0, 3.0), (0, 1), 40, 3.5)
    foreign = StateCodec(b"another-deployment-key", s.version, s.layers, s.hidden, 4).encode(state)
    other = StateCodec(KEY, "other-version", s.layers, s.hidden, 4).encode(state)
    states: dict[str, str] = {}
    out = []
    for n, batch in enumerate(requests(foreign, other)):
        service.explain_share.spans.clear()  # explanations' share of the worker: never the limit
        reqs = []
        for i, (body, headers, explain, _) in enumerate(batch):
            body, headers = _resolve(body, states), _resolve(headers, states)
            if not isinstance(body, bytes) and i % 3 != 2:
                body = json.dumps(body).encode()  # the client's bytes; every third parsed JSON
            reqs.append(Request(body, headers | ({"explain": "True"} if explain else {}),
                                f"r{n}-{i}"))  # fmt: skip
        results = service.handle_batch(reqs)
        out.append([record(r) for r in results])
        for (_, _, _, stream), r in zip(batch, results, strict=True):
            if stream is not None and hasattr(r, "headers") and "X-Stream-State" in r.headers:
                states[stream] = r.headers["X-Stream-State"]
    return out


if __name__ == "__main__":
    Path(sys.argv[2]).write_text(json.dumps(answers(sys.argv[1])))
