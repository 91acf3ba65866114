"""Client side of frequency answers and streams: chunking a file or pipe, reading float32 answers,
and what a stream sends (start, then the state it was given) without a server."""

from __future__ import annotations

import io
import json

import numpy as np
import pytest

from clients.chunks import read_chunks
from tools.frequency.client import STATE_HEADER, Extraction, SignalStream


def test_text_samples_are_chunked_across_lines_and_separators():
    src = io.BytesIO(b"0.5, 1\n-2 3e-1\n\n4,5,6\n7")
    chunks = [c.tolist() for c in read_chunks(src, 3)]
    assert chunks == [[0.5, 1.0, -2.0], [pytest.approx(0.3), 4.0, 5.0], [6.0, 7.0]]
    assert all(c.dtype == np.float32 for c in read_chunks(io.BytesIO(b"1 2"), 1))


def test_float32_samples_are_chunked_and_stray_bytes_refused():
    x = np.arange(7, dtype="<f4")
    chunks = list(read_chunks(io.BytesIO(x.tobytes()), 3, "f32"))
    assert [c.tolist() for c in chunks] == [[0, 1, 2], [3, 4, 5], [6]]
    with pytest.raises(ValueError, match="stray bytes"):
        list(read_chunks(io.BytesIO(x.tobytes() + b"\0"), 3, "f32"))
    with pytest.raises(ValueError, match="not a number"):
        list(read_chunks(io.BytesIO(b"1 two 3"), 2))


def test_float32_answer_is_read_by_its_layout_headers():
    data = np.arange(2 * 2 * 3, dtype="<f4").reshape(2, 2, 3)
    headers = {"X-Shape": "2,2,3", "X-Frequencies": "5,1", STATE_HEADER: "s", "X-Samples-Seen": "9"}
    got = Extraction.from_float32(data.tobytes(), headers)
    assert got.frequencies == (5.0, 1.0) and got.state == "s" and got.samples_seen == 9
    np.testing.assert_array_equal(got.signal, data[0])
    np.testing.assert_array_equal(got.std, data[1])


class Recorder:
    """Stands in for a ModelClient: records each JSON payload and answers like the server."""

    protocol = "grpc"

    def __init__(self):
        self.sent = []

    def predict(self, model, payload):
        self.sent.append(json.loads(json.dumps(payload)))
        n = len(payload["signal"])
        return {
            "components": [{"frequency": 1.0, "signal": [0.0] * n, "std": [0.0] * n}],
            "state": f"state-{len(self.sent)}",
            "samples_seen": n * len(self.sent),
            "model": {"version": "v"},
        }


def test_stream_starts_then_sends_back_the_state_of_the_last_answer():
    client = Recorder()
    stream = SignalStream(client, frequencies=(1,))
    for chunk in ([0.1, 0.2], [0.3], [0.4]):
        stream.send(chunk)
    first, second, third = client.sent
    assert first == {
        "signal": [pytest.approx(0.1), pytest.approx(0.2)],
        "stream": True,
        "frequencies": [1.0],
    }
    assert second["state"] == "state-1" and "stream" not in second and "frequencies" not in second
    assert third["state"] == "state-2" and stream.state == "state-3"
    resumed = SignalStream(client, state="saved")
    resumed.send([0.5])
    assert client.sent[-1]["state"] == "saved"


def test_float32_needs_rest():
    with pytest.raises(ValueError, match="need REST"):
        SignalStream(Recorder(), float32=True)


def test_a_stream_without_the_band_asks_every_chunk_so_and_reads_answers_without_std():
    client = Recorder()
    stream = SignalStream(client, frequencies=(1,), band=False)
    stream.send([0.1, 0.2])
    stream.send([0.3])
    assert all(sent["band"] is False for sent in client.sent)
    default = Recorder()
    SignalStream(default, frequencies=(1,)).send([0.1])
    assert "band" not in default.sent[0]  # the default sends what it always sent
    data = np.arange(2 * 3, dtype="<f4").reshape(1, 2, 3)
    got = Extraction.from_float32(data.tobytes(), {"X-Shape": "1,2,3", "X-Frequencies": "5,1"})
    assert got.std is None
    np.testing.assert_array_equal(got.signal, data[0])
    assert [set(c) for c in got.to_json()["components"]] == [{"frequency", "signal"}] * 2
