"""The frequency handler in-process: the tiny model the training code makes, TorchServe's own
Context around it, no server. One-shot and stream answers, the state a client carries between
chunks (to any worker), float32 answers, and refusals that never fail their batch neighbours."""

import json
from pathlib import Path

import numpy as np
import pytest
import yaml
from ts.context import Context, RequestProcessor
from ts.metrics.metric_cache_yaml_impl import MetricsCacheYamlImpl

from handlers.base import BATCH_SIZE_HEADER
from handlers.frequency.predict import FrequencyPredictor
from handlers.frequency.state import KEY_FILE_ENV
from handlers.frequency_handler import FrequencyHandler
from handlers.kits.signal.codec import STATE_HEADER, SignalRequest
from handlers.kits.signal.predict import Extraction
from training.frequency.config import CONFIGS
from training.frequency.data import make_signal

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"runtime": "onnx", "threads": 1, "max_samples": 5000, "mc_samples": 8}
KEY = b"a-test-key-shared-by-every-worker"
JSON = "application/json"
RAW = "application/octet-stream"


def make_context(model_dir: Path) -> Context:
    return Context(
        "frequency", str(model_dir), {"model": {"modelName": "frequency"}}, 8, None, "0.12.0",
        metrics=MetricsCacheYamlImpl(str(ROOT / "metrics.yaml")),
        model_yaml_config={"batchSize": 8, "handler": CONFIG},
    )  # fmt: skip


@pytest.fixture(scope="module")
def key_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("state-key") / "key"
    path.write_bytes(KEY)
    return path


def new_handler(model_dir: Path, key_file: Path) -> FrequencyHandler:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_FILE_ENV, str(key_file))
        h = FrequencyHandler()
        h.initialize(make_context(model_dir))
    return h


@pytest.fixture(scope="module")
def handler(frequency_artifacts, key_file):
    return new_handler(frequency_artifacts, key_file)


@pytest.fixture(scope="module")
def predictor(frequency_artifacts):
    return FrequencyPredictor.from_dir(frequency_artifacts, CONFIG, state_key=KEY)


@pytest.fixture(scope="module")
def signal() -> np.ndarray:
    return make_signal(CONFIGS["tiny"].signal, seed=3).mixed[:1200]


def run_batch(handler, requests: list[tuple[object, dict]]):
    """[(body, request headers)] → [(status, body, response headers)], as TorchServe would; JSON
    bodies are parsed, float32 ones returned as bytes."""
    ctx = make_context(Path("unused"))
    data, processors = [], []
    for body, headers in requests:
        data.append({"body": body})
        ctype = headers.get("Content-Type", JSON)
        processors.append(RequestProcessor({"body": {"content-type": ctype}} | headers))
    ctx.request_processor = processors
    ctx.request_ids = {i: f"req-{i}" for i in range(len(requests))}
    out = handler.handle(data, ctx)
    assert len(out) == len(requests)
    results = []
    for i, body in enumerate(out):
        headers = ctx.get_response_headers(i)
        parsed = body if headers["content-type"] == RAW else json.loads(body)
        results.append((ctx.get_response_status(i)[0], parsed, headers))
    return results


def as_json(payload: dict) -> tuple[bytes, dict]:
    return json.dumps(payload).encode(), {"Content-Type": JSON}


def components(body: dict) -> np.ndarray:
    return np.array([c["signal"] for c in body["components"]])


def stream_through(handlers, chunks, frequencies=(1, 7)) -> tuple[np.ndarray, dict]:
    """Send chunks as one stream, chunk k to handlers[k % len(handlers)]."""
    parts, state, body = [], None, {}
    for k, chunk in enumerate(chunks):
        payload = {"signal": chunk.tolist()}
        payload |= {"stream": True, "frequencies": list(frequencies)} if state is None else {}
        payload |= {"state": state} if state is not None else {}
        [(status, body, headers)] = run_batch(handlers[k % len(handlers)], [as_json(payload)])
        assert status == 200, body
        assert headers[STATE_HEADER] == body["state"]
        state = body["state"]
        parts.append(components(body))
    return np.concatenate(parts, axis=1), body


def test_one_shot_answer_schema_and_values(handler, predictor, signal):
    [(status, body, headers)] = run_batch(
        handler, [as_json({"signal": signal.tolist(), "frequencies": [3, 1]})]
    )
    assert status == 200 and headers["content-type"] == JSON and headers[BATCH_SIZE_HEADER] == "1"
    # no state: not a stream
    assert set(body) == {"sample_rate", "components", "model", "residual", "out_of_distribution",
                         "nonstationarity", "offset"}  # fmt: skip
    assert isinstance(body["residual"], float) and 0 <= body["residual"] <= 1
    # 1,200 samples: one whole window (the offset), not two (the nonstationarity)
    assert isinstance(body["offset"], float) and body["nonstationarity"] is None
    assert body["out_of_distribution"] is False  # today's training generator is in the family
    assert body["model"]["name"] == "frequency" and body["model"]["version"]
    assert [c["frequency"] for c in body["components"]] == [3.0, 1.0]
    want = predictor.predict([SignalRequest(signal.astype(np.float32), 1000, (3.0, 1.0), (1, 0))])
    assert isinstance(want[0], Extraction) and want[0].windows > 1
    np.testing.assert_allclose(components(body), want[0].components.signal, atol=1e-6)
    std = np.array([c["std"] for c in body["components"]])
    assert std.shape == (2, signal.size) and std.min() >= 0 and std.max() > 0


def test_stream_chunks_equal_the_whole_signal_and_carry_their_state(handler, signal):
    whole, _ = stream_through([handler], [signal])
    parts, last = stream_through([handler], np.array_split(signal, [1, 333, 334, 900]))
    assert last["samples_seen"] == signal.size and isinstance(last["state"], str)
    assert [c["frequency"] for c in last["components"]] == [1.0, 7.0]  # kept from the start
    assert float(np.abs(parts - whole).max()) <= 1e-5


def test_any_worker_continues_a_stream_with_the_shared_key(handler, frequency_artifacts, key_file):
    other = new_handler(
        frequency_artifacts, key_file
    )  # another worker: nothing in common but the key
    signal = make_signal(CONFIGS["tiny"].signal, seed=8).mixed[:900]
    whole, _ = stream_through([handler], [signal])
    parts, _ = stream_through([handler, other], np.array_split(signal, 6))
    assert float(np.abs(parts - whole).max()) <= 1e-5


def start(handler, signal, frequencies=(1, 7)) -> str:
    payload = {"signal": signal[:100].tolist(), "stream": True, "frequencies": list(frequencies)}
    [(status, body, _)] = run_batch(handler, [as_json(payload)])
    assert status == 200
    return body["state"]


def test_a_chunk_cannot_change_its_streams_frequencies(handler, signal):
    state = start(handler, signal)
    [(status, body, _)] = run_batch(
        handler, [as_json({"signal": [0.1], "state": state, "frequencies": [3]})]
    )
    assert status == 400 and "cannot change" in body["error"]
    [(status, _, _)] = run_batch(
        handler, [as_json({"signal": [0.1], "state": state, "frequencies": [1, 7]})]
    )
    assert status == 200


def test_state_from_another_model_version_is_a_409(handler, frequency_artifacts, signal):
    old = FrequencyPredictor.from_dir(frequency_artifacts, CONFIG, state_key=KEY)
    old_version = FrequencyPredictor(
        frequency_artifacts,
        old.settings.bind(old.settings._export, "1999.01.01-old"),
        state_key=KEY,
    )
    [answer] = old_version.predict(
        [SignalRequest(signal[:50].astype(np.float32), 1000, (1.0,), (0,), start=True)]
    )
    [(status, body, _)] = run_batch(handler, [as_json({"signal": [0.1], "state": answer.state})])
    assert status == 409 and body["kind"] == "stale_state"
    assert "1999.01.01-old" in body["error"] and "restart the stream" in body["error"]


def test_float32_answer_has_its_layout_in_headers_and_equals_json(handler, signal):
    raw = signal.astype("<f4").tobytes()
    headers = {"Content-Type": RAW, "X-Frequencies": "5,1", "Accept": RAW}
    [(status, body, out)] = run_batch(handler, [(raw, headers)])
    assert status == 200 and out["content-type"] == RAW and isinstance(body, bytes)
    assert out["X-Shape"] == f"2,2,{signal.size}" and out["X-Frequencies"] == "5,1"
    data = np.frombuffer(body, "<f4").reshape(2, 2, signal.size)
    [(_, as_json_body, _)] = run_batch(
        handler, [as_json({"signal": signal.tolist(), "frequencies": [5, 1]})]
    )
    # JSON numbers are the shortest text of each float32: both answers hold the same floats.
    np.testing.assert_array_equal(data[0], components(as_json_body).astype(np.float32))
    std = np.array([c["std"] for c in as_json_body["components"]], dtype=np.float32)
    np.testing.assert_array_equal(data[1], std)
    assert STATE_HEADER not in out  # one-shot
    assert out["X-Out-Of-Distribution"] == "false"
    assert float(out["X-Residual"]) == pytest.approx(as_json_body["residual"], rel=1e-5)
    assert float(out["X-Offset"]) == pytest.approx(as_json_body["offset"], rel=1e-5, abs=1e-9)
    assert out["X-Nonstationarity"] == "null"


def test_float32_stream_carries_its_state_in_headers(handler, signal):
    raw = [c.astype("<f4").tobytes() for c in np.array_split(signal, 3)]
    first = {"Content-Type": RAW, "X-Frequencies": "3", "X-Stream": "start", "Accept": RAW}
    [(status, a, ha)] = run_batch(handler, [(raw[0], first)])
    assert status == 200 and ha["X-Samples-Seen"] == str(len(raw[0]) // 4)
    parts = [np.frombuffer(a, "<f4").reshape(2, 1, -1)[0]]
    state = ha[STATE_HEADER]
    for chunk in raw[1:]:
        [(status, b, hb)] = run_batch(
            handler, [(chunk, {"Content-Type": RAW, STATE_HEADER: state, "Accept": RAW})]
        )
        assert status == 200 and hb["X-Frequencies"] == "3"
        parts.append(np.frombuffer(b, "<f4").reshape(2, 1, -1)[0])
        state = hb[STATE_HEADER]
    whole, _ = stream_through([handler], [signal], frequencies=(3,))
    assert float(np.abs(np.concatenate(parts, axis=1) - whole).max()) <= 1e-5


def test_bad_requests_in_a_mixed_batch_fail_alone(handler, signal):
    state = start(handler, signal)
    good_one_shot = as_json({"signal": signal[:300].tolist(), "frequencies": [3]})
    good_chunk = as_json({"signal": signal[100:200].tolist(), "state": state})
    results = run_batch(
        handler,
        [
            good_one_shot,
            as_json({"signal": [0.1], "state": state[:-8]}),
            good_chunk,
            (b'{"signal": [1.0, NaN]}', {"Content-Type": JSON}),
            as_json({"signal": [0.1], "state": state[:30] + "!" + state[31:]}),
        ],
    )
    assert [r[0] for r in results] == [200, 400, 200, 400, 400]
    assert {r[2][BATCH_SIZE_HEADER] for r in results} == {"5"}
    assert [r[1].get("kind") for r in results] == [
        None,
        "bad_state",
        None,
        "bad_field",
        "bad_state",
    ]
    [(_, alone, _)] = run_batch(handler, [good_chunk])
    np.testing.assert_allclose(components(results[2][1]), components(alone), atol=1e-6)


def test_model_config_in_the_repository_parses_and_has_no_stream_store(frequency_artifacts):
    config = yaml.safe_load((ROOT / "handlers" / "frequency" / "model-config.yaml").read_text())
    assert not {"stream_idle_s", "max_streams"} & set(config["handler"])
    predictor = FrequencyPredictor.from_dir(frequency_artifacts, config["handler"], state_key=KEY)
    assert predictor.settings.mc_samples >= 2


def test_unknown_or_retired_handler_setting_fails_at_load_naming_it(frequency_artifacts):
    from handlers.errors import ArchiveError

    with pytest.raises(ArchiveError, match="unknown frequency handler settings: stream_idle_s"):
        FrequencyPredictor.from_dir(
            frequency_artifacts, CONFIG | {"stream_idle_s": 300}, state_key=KEY
        )


@pytest.mark.parametrize("spinning", [False, True])
def test_intra_op_spinning_reaches_both_onnx_sessions(frequency_artifacts, spinning):
    # The same knob as sentiment's (bench: --variant handler.intra_op_spinning=true); off by default.
    config = CONFIG | {"runtime": "onnx"} | ({"intra_op_spinning": True} if spinning else {})
    engine = FrequencyPredictor.from_dir(frequency_artifacts, config, state_key=KEY).engine
    for runtime in (engine.sequence, engine.step):
        entry = runtime.options.get_session_config_entry("session.intra_op.allow_spinning")
        assert entry == ("1" if spinning else "0")


def white_noise(n: int, seed: int = 11) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 1.0, n).astype(np.float32)


def test_manifest_carries_the_ood_threshold_serving_reads(frequency_artifacts, predictor):
    manifest = json.loads((frequency_artifacts / "manifest.json").read_text())
    threshold = manifest["handler"]["ood_threshold"]
    assert 0 < threshold < 1 and predictor.settings.ood_threshold == threshold


def test_white_noise_and_other_tones_are_flagged_in_both_answer_forms(handler):
    t = np.arange(1500) / 1000
    other = (np.sin(2 * np.pi * 2 * t) + 0.7 * np.sin(2 * np.pi * 11 * t + 1)).astype(np.float32)
    for sig in (white_noise(1500), other):
        [(status, body, _)] = run_batch(handler, [as_json({"signal": sig.tolist()})])
        assert status == 200 and body["out_of_distribution"] is True and body["residual"] > 0.9
        raw = (sig.astype("<f4").tobytes(), {"Content-Type": RAW, "Accept": RAW})
        [(status, _, out)] = run_batch(handler, [raw])
        assert status == 200 and out["X-Out-Of-Distribution"] == "true"
        assert float(out["X-Residual"]) > 0.9


def test_shorter_than_the_lowest_period_is_not_judged(handler, signal):
    [(status, body, _)] = run_batch(handler, [as_json({"signal": white_noise(999).tolist()})])
    assert status == 200 and body["residual"] is None and body["out_of_distribution"] is None
    raw = (white_noise(999).astype("<f4").tobytes(), {"Content-Type": RAW, "Accept": RAW})
    [(status, _, out)] = run_batch(handler, [raw])
    assert out["X-Residual"] == "null" and out["X-Out-Of-Distribution"] == "null"


def test_streams_are_judged_on_everything_they_have_seen(handler, signal):
    noise = white_noise(1000)
    start = {"signal": signal[:500].tolist(), "stream": True, "frequencies": [1]}
    [(_, a, _)] = run_batch(handler, [as_json(start)])
    assert a["out_of_distribution"] is None and a["residual"] is None  # under a window
    more = {"signal": signal[500:1000].tolist(), "state": a["state"]}
    [(_, b, _)] = run_batch(handler, [as_json(more)])
    assert b["out_of_distribution"] is False and isinstance(b["residual"], float)
    assert b["samples_seen"] == 1000 and b["nonstationarity"] is None  # one window of two
    [(_, c, _)] = run_batch(handler, [as_json({"signal": noise.tolist(), "state": b["state"]})])
    assert c["out_of_distribution"] is True and c["samples_seen"] == 2000
    assert c["nonstationarity"] > 0.1  # the components went away
    [(_, d, _)] = run_batch(handler, [as_json({"signal": [0.1] * 10, "state": c["state"]})])
    assert d["out_of_distribution"] is True  # 10 samples more: still the stream's judgement
    assert d["residual"] == c["residual"] and d["nonstationarity"] == c["nonstationarity"]
    assert len(d["state"]) == len(a["state"])  # the state token is unchanged in size


def test_without_the_band_the_signals_are_the_banded_answers_byte_for_byte(handler, signal):
    """`band: false` (JSON) and `X-Band: false` (float32), one-shot and stream, alone and in a
    batch beside banded requests: no std, and the very same signal floats."""
    banded = {"signal": signal.tolist(), "frequencies": [3, 1]}
    [(_, with_band, _)] = run_batch(handler, [as_json(banded)])
    mixed = run_batch(handler, [as_json(banded | {"band": False}), as_json(banded)])
    assert [status for status, _, _ in mixed] == [200, 200]
    bare = mixed[0][1]
    assert all(set(c) == {"frequency", "signal"} for c in bare["components"])
    assert all("std" in c for c in mixed[1][1]["components"])
    assert json.dumps(bare["components"]) == json.dumps(
        [{"frequency": c["frequency"], "signal": c["signal"]} for c in with_band["components"]]
    )
    raw = signal.astype("<f4").tobytes()
    headers = {"Content-Type": RAW, "X-Frequencies": "3,1", "Accept": RAW}
    [(_, full, hf)] = run_batch(handler, [(raw, headers)])
    [(status, half, hh)] = run_batch(handler, [(raw, headers | {"X-Band": "false"})])
    assert (
        status == 200 and hh["X-Shape"] == f"1,2,{signal.size}" and hf["X-Shape"].startswith("2,")
    )
    assert hh["X-Layout"].endswith("bands signal") and hf["X-Layout"].endswith("bands signal,std")
    assert half == full[: len(full) // 2]  # the signal plane, byte for byte
    assert len(json.dumps(bare)) < 0.6 * len(json.dumps(with_band))
    print(f"\nanswer sizes (2 frequencies x {signal.size} samples): JSON {len(json.dumps(with_band))}"
          f" -> {len(json.dumps(bare))} bytes; float32 {len(full)} -> {len(half)} bytes")  # fmt: skip
    # A stream: the option per chunk, the state the same.
    chunks = np.array_split(signal, 3)
    state_b = state_n = None
    for chunk in chunks:
        p = {"signal": chunk.tolist()}
        pb = p | ({"state": state_b} if state_b else {"stream": True, "frequencies": [1, 7]})
        pn = p | ({"state": state_n} if state_n else {"stream": True, "frequencies": [1, 7]})
        [(_, b, _), (_, n, _)] = run_batch(handler, [as_json(pb), as_json(pn | {"band": False})])
        assert all("std" not in c for c in n["components"]) and "std" in b["components"][0]
        assert [c["signal"] for c in n["components"]] == [c["signal"] for c in b["components"]]
        assert n["samples_seen"] == b["samples_seen"]
        state_b, state_n = b["state"], n["state"]
    assert len(state_n) == len(state_b)


@pytest.mark.parametrize("band", ["maybe", 0, 1, [], "false"])
def test_a_bad_band_field_is_a_400_naming_it(handler, band):
    [(status, body, _)] = run_batch(handler, [as_json({"signal": [0.1, 0.2], "band": band})])
    assert status == 400 and body["kind"] == "bad_field" and "'band'" in body["error"]


@pytest.mark.parametrize("band", ["maybe", "0", ""])
def test_a_bad_band_header_is_a_400_naming_it(handler, band):
    raw = np.array([0.1, 0.2], "<f4").tobytes()
    headers = {"Content-Type": RAW, "Accept": RAW, "X-Band": band}
    [(status, body, _)] = run_batch(handler, [(raw, headers)])
    assert status == 400 and body["kind"] == "bad_field" and "X-Band" in body["error"]


def test_a_null_band_is_the_default(handler):
    [(status, body, _)] = run_batch(handler, [as_json({"signal": [0.1, 0.2], "band": None})])
    assert status == 200 and "std" in body["components"][0]


def test_the_light_request_for_load_is_answered(handler):
    """tools/frequency/samples.light_request, the body `make rollout MODEL=frequency`'s Locust users
    send: a valid one-shot request, answered with both components, and varied by its argument."""
    from tools.frequency.samples import light_request

    bodies = [light_request(i) for i in range(2)]
    assert bodies[0] != bodies[1]
    answers = run_batch(handler, [as_json(b) for b in bodies])
    assert [status for status, _, _ in answers] == [200, 200], answers
    assert all([c["frequency"] for c in body["components"]] == [1.0, 3.0] for _, body, _ in answers)
