"""The signal kit's bad-input and cost cases, written once and run over every registered model
built on the kit (its registry entry's `kits`): each model of the modality inherits them. A
model's tiny export comes from its session fixture `<name>_artifacts` (tests/fixtures/), its
limits from its own model-config.yaml; every request goes through the model's `ModelService`, as
served, its stream states signed with a test key."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from clients.kits import signal as signal_client
from handlers import registry
from handlers.kits.signal import codec
from handlers.kits.signal.state import KEY_FILE_ENV
from handlers.service import ModelService, Request
from tests.fixtures.served import handler_config
from tests.support import wire

SIGNAL_MODELS = [s.name for s in registry.MODELS if "signal" in s.kits]
JSON = {"Content-Type": "application/json"}
KEY = b"the-signal-kit-tests-state-key"


def test_the_kit_has_models():
    assert "frequency" in SIGNAL_MODELS


@pytest.fixture(scope="module", params=SIGNAL_MODELS)
def model(request) -> tuple[str, Path]:
    """(name, its tiny export)."""
    return request.param, request.getfixturevalue(f"{request.param}_artifacts")


@pytest.fixture(scope="module")
def key_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("signal-key") / "key"
    path.write_bytes(KEY)
    return path


def served(model: tuple[str, Path], key_file: Path, **overrides: object) -> ModelService:
    """The model as its archive serves it (its model-config's limits), on one thread."""
    name, artifacts = model
    config = handler_config(name) | {"threads": 1} | overrides
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_FILE_ENV, str(key_file))
        return ModelService.from_dir(artifacts, name=name, config=config)


@pytest.fixture(scope="module")
def service(model, key_file) -> ModelService:
    return served(model, key_file)


def as_request(body: object, headers: dict | None = None) -> Request:
    """A JSON body as the client's bytes; (bytes, headers) as a raw body."""
    if isinstance(body, tuple):
        data, raw_headers = body
        return Request(data, raw_headers | (headers or {}))
    return Request(json.dumps(body).encode(), JSON | (headers or {}))


def ask(service: ModelService, *bodies: object, explain: bool = False) -> list:
    headers = {"explain": "True"} if explain else {}
    service.explain_share.spans.clear()  # explanations' share of the worker: never the limit here
    return service.handle_batch([as_request(b, headers) for b in bodies])


def wave(service: ModelService, n: int) -> np.ndarray:
    s = service.settings
    t = np.arange(n) / s.sample_rate
    return sum(np.sin(2 * np.pi * f * t) for f in s.frequencies).astype(np.float32)


def f32(x: np.ndarray, state: str | None = None) -> tuple[bytes, dict]:
    """A raw float32 request (its parameters in headers)."""
    return signal_client.request_float32(x, state=state)


def state_of(reply) -> str:
    return reply.headers[codec.STATE_HEADER]


def altered(token: str) -> str:
    raw = bytearray(base64.urlsafe_b64decode(token))
    raw[-1] ^= 1
    return base64.urlsafe_b64encode(bytes(raw)).decode()


@pytest.fixture(scope="module")
def foreign_states(model, service, key_file, tmp_path_factory) -> tuple[str, str]:
    """A stream state the same model signed with another key, and one another version of it
    signed with this key: both expired for this deployment (409)."""
    name, artifacts = model
    other_key = tmp_path_factory.mktemp("other-key") / "key"
    other_key.write_bytes(b"another-deployment-entirely")
    [r] = ask(served(model, other_key), {"signal": wave(service, 50).tolist(), "stream": True})
    copy = tmp_path_factory.mktemp("other-version") / "export"
    shutil.copytree(artifacts, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["version"] = "another-version"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    [v] = ask(
        served((name, copy), key_file), {"signal": wave(service, 50).tolist(), "stream": True}
    )
    return state_of(r), state_of(v)


def bad_cases(
    service: ModelService, foreign: tuple[str, str]
) -> list[tuple[str, object, int, str]]:
    """(name, request body or (bytes, headers), status, kind) from the model's own limits."""
    s = service.settings
    good = wave(service, 100)
    [opened] = ask(service, {"signal": good.tolist(), "stream": True})
    token = state_of(opened)
    unserved = max(s.frequencies) + 0.5
    other_key, other_version = foreign
    return [
        ("empty JSON signal", {"signal": []}, 400, "empty_input"),
        ("empty float32 body", (b"", {"Content-Type": codec.FLOAT32}), 400, "empty_input"),
        ("NaN in JSON", (b'{"signal": [1.0, NaN]}', JSON), 400, "bad_field"),
        ("inf in JSON", (b'{"signal": [1.0, 1e999]}', JSON), 400, "bad_field"),
        ("past float32", {"signal": [1.0, 1e39]}, 400, "bad_field"),
        ("NaN in float32", f32(np.array([1.0, np.nan])), 400, "bad_field"),
        ("inf in float32", f32(np.array([np.inf])), 400, "bad_field"),
        ("too long JSON", {"signal": [0.0] * (s.max_samples + 1)}, 400, "too_large"),
        ("too long float32", f32(np.zeros(s.max_samples + 1)), 400, "too_large"),
        ("float32 body of odd length", (good.tobytes()[:-1], f32(good)[1]), 400, "bad_encoding"),
        ("float64 body", (good.astype("<f8").tobytes() + b"\0\0", f32(good)[1]), 400,
         "bad_encoding"),
        ("booleans", {"signal": [True, False]}, 400, "bad_field"),
        ("strings", {"signal": ["1", "2"]}, 400, "bad_field"),
        ("nested", {"signal": [[1.0], [2.0]]}, 400, "bad_field"),
        ("no signal", {"samples": [1.0]}, 400, "bad_field"),
        ("not an object", [1.0, 2.0], 400, "bad_field"),
        ("unserved frequency", {"signal": good.tolist(), "frequencies": [unserved]}, 400,
         "bad_field"),
        ("other sample rate", {"signal": good.tolist(), "sample_rate": s.sample_rate + 1}, 400,
         "bad_field"),
        ("stream and state", {"signal": good.tolist(), "stream": True, "state": token}, 400,
         "bad_field"),
        ("forged state", {"signal": good.tolist(), "state": "Zm9yZ2Vk"}, 400, "bad_state"),
        ("not base64 state", {"signal": good.tolist(), "state": "!!!!"}, 400, "bad_state"),
        ("altered state", {"signal": good.tolist(), "state": altered(token)}, 400, "bad_state"),
        ("altered state header", f32(good, state=altered(token)), 400, "bad_state"),
        ("state of another key", {"signal": good.tolist(), "state": other_key}, 409,
         "stale_state"),
        ("state of another version", {"signal": good.tolist(), "state": other_version}, 409,
         "stale_state"),
        ("bad X-Stream", (good.tobytes(), f32(good)[1] | {"X-Stream": "go"}), 400, "bad_field"),
        ("unsupported type", (good.tobytes(), {"Content-Type": "image/png"}), 415,
         "unsupported_media_type"),
    ]  # fmt: skip


def test_every_bad_input_is_a_clear_4xx_and_its_neighbours_are_answered(service, foreign_states):
    cases = bad_cases(service, foreign_states)
    good = {"signal": wave(service, 100).tolist()}
    for at in range(0, len(cases), 7):
        chunk = cases[at : at + 7]
        results = ask(service, good, *(c[1] for c in chunk))
        assert results[0].content_type == "application/json", results[0]
        for (name, _, status, kind), got in zip(chunk, results[1:], strict=True):
            assert (getattr(got, "status", 200), getattr(got, "kind", None)) == (status, kind), (
                name,
                got,
            )
            assert got.reason and got.reason.isascii(), name


def test_a_stream_continues_with_its_state_and_an_explanation_refuses_a_chunk(service):
    x = wave(service, 300)
    [first] = ask(service, {"signal": x[:120].tolist(), "stream": True})
    [second] = ask(service, f32(x[120:], state=state_of(first)))
    assert second.headers[codec.SAMPLES_SEEN_HEADER] == "300"
    assert state_of(second) != state_of(first)
    [chunk] = ask(service, {"signal": x.tolist(), "state": state_of(second)}, explain=True)
    assert (chunk.status, chunk.kind) == (400, "bad_field"), chunk


class Counting:
    """The model's engine, counting the windows it is asked to run."""

    def __init__(self, engine):
        self.engine, self.calls = engine, 0

    def windows(self, requests):
        self.calls += len(requests)
        return self.engine.windows(requests)

    def __getattr__(self, name):
        return getattr(self.engine, name)


def test_samples_x_frequencies_past_the_batch_budget_get_503_and_nothing_runs_for_them(service):
    s = service.settings
    n = min(s.max_samples, s.max_batch_samples // len(s.frequencies))
    requests = s.max_batch_samples // (n * len(s.frequencies)) + 2
    assert service.model.cost(service.model.parse(as_request({"signal": [0.0] * n}))) == n * len(
        s.frequencies
    )
    engine = service.model.predictor.engine
    service.model.predictor.engine = counting = Counting(engine)
    try:
        results = ask(service, *([{"signal": wave(service, n).tolist()}] * requests))
    finally:
        service.model.predictor.engine = engine
    answered = [r for r in results if getattr(r, "status", 200) == 200]
    refused = [r for r in results if getattr(r, "status", 200) == 503]
    assert answered and refused, results
    assert all(r.kind == "overloaded" and "samples x frequencies" in r.reason for r in refused)
    assert counting.calls == len(answered)


def test_explanations_are_priced_in_sample_passes_before_anything_runs(model, key_file, service):
    s = service.settings
    explainer = service.model.explainer
    x = wave(service, 400)
    parsed = service.model.parse(as_request({"signal": x.tolist()}))
    passes = explainer.cost(parsed)
    blocks = -(-(400 - s.explain_block) // (s.explain_block // 2)) + 1
    assert passes == (blocks + 1) * len(s.frequencies)
    assert service.model.explain_cost(parsed) == passes * 400
    tight = served(model, key_file, max_explain_samples=passes * 400 - 1)
    engine = tight.model.predictor.engine
    tight.model.predictor.engine = counting = Counting(engine)
    [big] = ask(tight, {"signal": x.tolist()}, explain=True)
    assert (big.status, big.kind) == (400, "too_large"), big
    assert f"{passes * 400} sample-passes" in big.reason
    assert counting.calls == 0
    [fits] = ask(tight, {"signal": x[:200].tolist(), "frequencies": [s.frequencies[0]]},
                 explain=True)  # fmt: skip
    body = json.loads(fits.body)
    assert len(body["attributions"][0]) == 200 and body["method"] == "occlusion"


def test_the_tensor_contract_maps_fp32_signals_and_binary_tensors(model, service):
    name, _ = model
    from oip.contract import Contract

    oip = registry.get(name).spec().contract
    s = service.settings
    contract = Contract(name, s)
    assert [t.datatype for t in oip.inputs(s)][:1] == ["FP32"]
    x = wave(service, 250)
    native = wire.native(contract, {"signal": x}, {"frequencies": f"{s.frequencies[0]:g}"})
    [reply] = service.handle_batch([Request(native.body, native.headers)])
    assert reply.content_type == codec.FLOAT32
    out = {o.name: o for o in wire.answer(contract, reply)}
    assert out["signal"].data.shape == (1, 250) and out["signal"].datatype == "FP32"
    assert out["frequencies"].data.tolist() == [s.frequencies[0]]
    opened = wire.native(contract, {"signal": x}, {"stream": True})
    [chunk] = service.handle_batch([Request(opened.body, opened.headers)])
    token = {o.name: o for o in wire.answer(contract, chunk)}["state"].data[0]
    with pytest.raises(Exception, match="once"):
        wire.native(
            contract, {"signal": x, "state": np.array([token], dtype=object)}, {"state": "x"}
        )


def test_the_envelope_refuses_altered_foreign_stale_and_expired_states():
    """The kit's signed envelope alone (a model may set a maximum age; frequency sets none)."""
    from handlers.errors import BadState, StaleState
    from handlers.kits.signal.state import SignedStates

    now = [1000.0]

    def envelope(key: bytes = KEY, version: str = "v1", max_age_s: float | None = 60.0):
        return SignedStates(key, version, b"TEST", b"label", 4, max_age_s, clock=lambda: now[0])

    def size(raw: bytes, at: int) -> int:
        return 4

    token = envelope().seal(b"abcd")
    assert envelope().open(token, size) == b"abcd"
    now[0] += 59
    assert envelope().open(token, size) == b"abcd"
    now[0] += 2
    with pytest.raises(StaleState, match="expired"):
        envelope().open(token, size)
    with pytest.raises(StaleState, match="another key"):
        envelope(b"another-key-entirely").open(envelope().seal(b"abcd"), size)
    with pytest.raises(StaleState, match="model version"):
        envelope(version="v2").open(envelope().seal(b"abcd"), size)
    with pytest.raises(BadState, match="altered"):
        envelope().open(altered(envelope().seal(b"abcd")), size)
    with pytest.raises(BadState, match="wrong size"):
        envelope(max_age_s=None).open(envelope().seal(b"abcd"), size)  # a time it does not expect
    timeless = envelope(max_age_s=None)
    now[0] += 10**6
    assert timeless.open(timeless.seal(b"abcd"), size) == b"abcd"  # never expires


def test_the_typed_forms_are_the_wires_and_an_oip_infer_writes_no_body(model, service, monkeypatch):
    """The kit's typed request and answer (codec.SignalInput, predict.Extraction): the OIP contract
    path (tensors → typed request → the worker → tensors) gives the float32 answer's tensors to the
    bit, its row is the JSON answer's value, and it writes and parses no body at all: no JSON call,
    no float32 body or answer encoded or decoded."""
    from collections import Counter

    from handlers import codec as bodies
    from handlers.kits.signal.predict import Extraction
    from oip.contract import Contract
    from tests.support.json_calls import json_calls

    name, _ = model
    s = service.settings
    x = wave(service, 250)
    contract = Contract(name, s)
    coded: Counter = Counter()
    for module, fn in ((signal_client, "request_float32"), (codec, "answer_float32"),
                       (signal_client, "decode_answer"), (bodies, "decode_request")):  # fmt: skip
        real = getattr(module, fn)

        def counted(*args, _real=real, _fn=fn, **kwargs):
            coded[_fn] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(module, fn, counted)
    item = type(
        "Input", (), {"name": "signal", "datatype": "FP32", "shape": [250], "data": x.tolist()}
    )
    for parameters in ({"frequencies": f"{s.frequencies[0]:g}"}, {"band": False}, {}):
        [reply] = service.handle_batch(
            [Request(**vars(wire.native(contract, {"signal": x}, parameters)))]
        )
        want = wire.answer(contract, reply, False)
        coded.clear()
        with json_calls(monkeypatch) as calls:
            request = contract.request(contract.read_inputs([item]), parameters, "r", False)
            [outputs] = service.handle_batch([request], contract.write)
        assert not calls and not coded, (calls, coded)
        assert request.body is None and isinstance(request.typed, codec.SignalInput)
        assert [o.name for o in outputs] == [o.name for o in want], parameters
        for got, expected in zip(outputs, want, strict=True):
            assert got.datatype == expected.datatype, got.name
            assert got.data.dtype == expected.data.dtype and got.data.shape == expected.data.shape
            assert got.data.tobytes() == expected.data.tobytes(), (parameters, got.name)
    [answer] = service.handle_batch([as_request({"signal": x.tolist()})], lambda a: a)
    assert isinstance(answer, Extraction)
    [reply] = ask(service, {"signal": x.tolist()})
    assert answer.to_row() == json.loads(reply.body)
