"""Per-sequence state: chunked streams equal whole ones, and state expires or is closed."""

import numpy as np
import pytest

from handlers.frequency.codec import SignalRequest
from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.settings import FrequencySettings
from handlers.frequency.streaming import StateStore, StreamState
from training.common.manifest import read_manifest
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def state() -> StreamState:
    z = np.zeros((1, 1, 4), dtype=np.float32)
    return StreamState(h=z, c=z, frequencies=(1.0,), selectors=(0,))


def test_idle_stream_expires_and_active_one_survives():
    clock = Clock()
    store = StateStore(idle_s=10, capacity=8, clock=clock)
    store.put("idle", state())
    clock.now = 6
    store.put("active", state())
    clock.now = 12
    assert store.get("idle") is None
    assert store.get("active") is not None
    clock.now = 16.1
    assert "active" not in store and len(store) == 0


def test_closing_a_stream_frees_its_state():
    store = StateStore(idle_s=10, capacity=8)
    store.put("s", state())
    assert store.close("s") and len(store) == 0 and not store.close("s")


def test_least_recently_used_stream_is_dropped_beyond_capacity():
    clock = Clock()
    store = StateStore(idle_s=100, capacity=2, clock=clock)
    for i, sid in enumerate(("a", "b")):
        clock.now = i
        store.put(sid, state())
    clock.now = 3
    store.put("a", store.get("a"))  # touch a: b is now the oldest
    store.put("c", state())
    assert "b" not in store and "a" in store and "c" in store


@pytest.fixture(scope="module")
def engine(frequency_artifacts):
    settings = FrequencySettings.from_sources(
        {"runtime": "onnx"}, read_manifest(frequency_artifacts)["handler"]
    )
    return FrequencyEngine(settings, frequency_artifacts)


def test_chunked_stream_equals_whole_stream(engine):
    sig = make_signal(CONFIGS["tiny"].signal, seed=5).mixed
    req = SignalRequest(sig, 1000, (1.0, 7.0), (0, 3))
    ((whole, _),) = engine.stream([(req, engine.zero_state(req))])
    st = engine.zero_state(req)
    parts = []
    for chunk in np.array_split(sig, [1, 40, 41, 700]):
        ((comp, st),) = engine.stream(
            [(SignalRequest(chunk, 1000, req.frequencies, req.selectors), st)]
        )
        parts.append(comp.signal)
    assert st.samples_seen == sig.shape[0]
    assert np.abs(np.concatenate(parts, axis=1) - whole.signal).max() <= 1e-5


def test_streams_batched_together_do_not_leak_state(engine):
    a = make_signal(CONFIGS["tiny"].signal, seed=6).mixed[:300]
    b = make_signal(CONFIGS["tiny"].signal, seed=7).mixed[:300]
    ra, rb = SignalRequest(a, 1000, (3.0,), (1,)), SignalRequest(b, 1000, (3.0, 5.0), (1, 2))
    together = engine.stream([(ra, engine.zero_state(ra)), (rb, engine.zero_state(rb))])
    ((alone_b, _),) = engine.stream([(rb, engine.zero_state(rb))])
    np.testing.assert_allclose(together[1][0].signal, alone_b.signal, atol=1e-5)
    assert together[0][0].signal.shape == (1, 300) and together[1][1].h.shape[1] == 2
