"""Every registered model over the Open Inference Protocol (oip/, KServe's model server), driven by
`tritonclient` over HTTP and gRPC, JSON and binary tensors, against a real server process on free
ports serving the tiny archives; each answer compared to the bit with the in-process
`ModelService` answer to the same input, and refusals checked for their own status per request."""

from __future__ import annotations

import base64
import io
import json

import numpy as np
import pytest
import requests

from handlers import registry
from handlers.errors import valid_request_id
from handlers.service import ModelService, Request
from tests.support.oip_client import pack, unpack

REVIEWS = ["a fine film with a great cast", "dull and far too long", "loved it"]


@pytest.fixture(scope="session")
def services(
    sentiment_artifacts, frequency_artifacts, digits_artifacts, tabular_artifacts
) -> dict[str, ModelService]:
    """The in-process lifecycle of each model over the same files the archives carry."""
    from tests.fixtures.served import handler_config

    dirs = {
        "sentiment": sentiment_artifacts,
        "frequency": frequency_artifacts,
        "digits": digits_artifacts,
        "tabular": tabular_artifacts,
    }
    return {m: ModelService.from_dir(d, name=m, config=handler_config(m)) for m, d in dirs.items()}


def in_process(service: ModelService, body: bytes, headers: dict) -> tuple[object, dict]:
    [reply] = service.handle_batch([Request(body, headers, "in-process")])
    assert not isinstance(reply, Exception), reply
    return reply.body, reply.headers


def call(
    model: str, inputs: list[tuple[str, str, np.ndarray]], transport: str, binary: bool, **kw
) -> dict:
    return {
        "transport": transport,
        "binary": binary,
        "model": model,
        "inputs": [{"name": n, "datatype": d, "array": pack(a)} for n, d, a in inputs],
        **kw,
    }


TRANSPORTS = [("http", False), ("http", True), ("grpc", False), ("grpc", True)]


def _outputs(result: dict) -> dict[str, np.ndarray]:
    assert result["error"] is None, result["error"]
    return {n: unpack(a) for n, a in result["outputs"].items()}


def _text(col: np.ndarray) -> list[str]:
    return [base64.b64decode(x).decode() for x in col]


def test_every_registered_model_is_served_with_metadata_from_its_contract(oip_server, services):
    from oip.contract import Contract

    calls = [
        {"metadata": True, "transport": t, "model": m}
        for m in registry.names()
        for t in ("http", "grpc")
    ]
    results = oip_server.run(calls)
    for c, got in zip(calls, results, strict=True):
        contract = Contract(c["model"], services[c["model"]].settings)
        assert got["live"] and got["ready"] and got["model_ready"]
        meta = got["metadata"]
        assert meta["name"] == c["model"]
        want_in = [t.metadata() for t in contract.inputs]
        want_out = [t.metadata() for t in contract.outputs]
        for key, want in (("inputs", want_in), ("outputs", want_out)):
            seen = [
                {
                    "name": t["name"],
                    "datatype": t["datatype"],
                    "shape": [int(d) for d in t["shape"]],
                }
                for t in meta[key]
            ]
            assert seen == want, (c, key)
    # Derived, not hand-written: the probabilities' width is the model's own label count.
    sentiment = Contract("sentiment", services["sentiment"].settings)
    width = {t.name: t.shape for t in sentiment.outputs}["probabilities"][1]
    assert width == len(services["sentiment"].settings.export.labels)


@pytest.mark.parametrize(("transport", "binary"), TRANSPORTS)
def test_sentiment_answers_equal_the_in_process_answer_to_the_bit(
    oip_server, services, transport, binary
):
    texts = np.array([t.encode() for t in REVIEWS], dtype=object)
    [result] = oip_server.run(
        [
            call(
                "sentiment",
                [("text", "BYTES", texts)],
                transport,
                binary,
                id=f"req-{transport}-{binary}",
            )
        ]
    )
    assert result["id"] == f"req-{transport}-{binary}"
    got = _outputs(result)
    body, _ = in_process(
        services["sentiment"],
        json.dumps({"texts": REVIEWS}).encode(),
        {"Content-Type": "application/json"},
    )
    rows = json.loads(body)
    labels = services["sentiment"].settings.export.labels
    assert _text(got["label"]) == [r["label"] for r in rows]
    want = np.array([[r["probabilities"][lab] for lab in labels] for r in rows])
    assert got["probabilities"].dtype == np.float64
    assert np.array_equal(got["probabilities"], want)
    for name in ("entropy", "mutual_information", "std"):
        assert np.array_equal(got[name], np.array([r["uncertainty"][name] for r in rows]))
    assert got["truncated"].tolist() == [r["truncated"] for r in rows]


def _frequency_call(oip_server, services, transport, binary, parameters):
    """A 256-sample sine at frequency's first frequency, asked over OIP: (signal, outputs)."""
    settings = services["frequency"].settings
    t = np.arange(256)
    signal = np.sin(2 * np.pi * settings.frequencies[0] * t / settings.sample_rate).astype(
        np.float32
    )
    call_ = call(
        "frequency", [("signal", "FP32", signal)], transport, binary, parameters=parameters
    )
    [result] = oip_server.run([call_])
    return signal, _outputs(result)


@pytest.mark.parametrize(("transport", "binary"), TRANSPORTS)
def test_frequency_signal_equals_the_in_process_float32_answer_to_the_bit(
    oip_server, services, transport, binary
):
    from clients.kits.signal import decode_answer, request_float32

    settings = services["frequency"].settings
    freqs = ",".join(f"{f:g}" for f in settings.frequencies[:2])
    signal, got = _frequency_call(oip_server, services, transport, binary, {"frequencies": freqs})
    body, headers = request_float32(signal, frequencies=settings.frequencies[:2])
    answer = decode_answer(*in_process(services["frequency"], body, headers))
    assert got["signal"].dtype == np.float32 and got["signal"].shape == answer.signal.shape
    assert np.array_equal(got["signal"], answer.signal)
    assert np.array_equal(got["std"], answer.std)
    assert got["frequencies"].tolist() == list(answer.frequencies)


@pytest.mark.parametrize(("transport", "binary"), TRANSPORTS)
def test_frequency_without_the_band_answers_the_same_signal_and_no_std(
    oip_server, services, transport, binary
):
    from clients.kits.signal import decode_answer, request_float32

    signal, got = _frequency_call(oip_server, services, transport, binary, {"band": False})
    assert "std" not in got
    body, headers = request_float32(signal)
    answer = decode_answer(*in_process(services["frequency"], body, headers))
    assert np.array_equal(got["signal"], answer.signal)
    assert got["frequencies"].tolist() == list(answer.frequencies)


def test_frequency_stream_continues_from_the_state_it_answered(oip_server, services):
    from clients.kits.signal import decode_answer, request_float32

    settings = services["frequency"].settings
    t = np.arange(256)
    signal = np.sin(2 * np.pi * settings.frequencies[0] * t / settings.sample_rate).astype(
        np.float32
    )
    first, second = signal[:128], signal[128:]
    [start] = oip_server.run(
        [call("frequency", [("signal", "FP32", first)], "grpc", True, parameters={"stream": True})]
    )
    out = _outputs(start)
    state = _text(out["state"])[0]
    assert int(out["samples_seen"][0]) == 128
    # The state goes back as a BYTES input over REST (or as the `state` parameter).
    [going] = oip_server.run(
        [
            call(
                "frequency",
                [
                    ("signal", "FP32", second),
                    ("state", "BYTES", np.array([state.encode()], dtype=object)),
                ],
                "http",
                True,
            )
        ]
    )
    out2 = _outputs(going)
    assert int(out2["samples_seen"][0]) == 256
    body, headers = request_float32(first, stream=True)
    a1 = decode_answer(*in_process(services["frequency"], body, headers))
    body, headers = request_float32(second, state=a1.state)
    a2 = decode_answer(*in_process(services["frequency"], body, headers))
    assert np.array_equal(out2["signal"], a2.signal)


@pytest.mark.parametrize(("transport", "binary"), TRANSPORTS)
def test_digits_grids_and_encoded_images_equal_the_in_process_answer(
    oip_server, services, transport, binary
):
    from tools.digits import samples

    grid = np.asarray(samples.EXAMPLE["image"], dtype=np.float32)
    png, _, _ = samples.binary_example()
    # An encoded image is not UTF-8 text, so JSON REST cannot carry it: binary tensors (or gRPC).
    encoded = transport == "grpc" or binary
    calls = [
        call("digits", [("grid", "FP32", grid[None])], transport, binary),
        call("digits", [("grid", "UINT8", grid[None].astype(np.uint8))], transport, binary),
    ]
    bodies: list[dict] = [
        {"images": [grid.tolist()]},
        {"images": [grid.astype(np.uint8).tolist()]},
    ]
    if encoded:
        calls.append(
            call("digits", [("image", "BYTES", np.array([png], dtype=object))], transport, binary)
        )
        bodies.append({"images": [base64.b64encode(png).decode()]})
    results = oip_server.run(calls)
    labels = services["digits"].settings.export.classes
    for result, body in zip(results, bodies, strict=True):
        got = _outputs(result)
        rows = json.loads(
            in_process(
                services["digits"], json.dumps(body).encode(), {"Content-Type": "application/json"}
            )[0]
        )
        assert _text(got["label"]) == [r["label"] for r in rows]
        assert np.array_equal(
            got["probabilities"], np.array([[r["probabilities"][c] for c in labels] for r in rows])
        )
        assert _text(got["polarity"]) == [r["polarity"] for r in rows]


def test_refusals_get_their_own_status_over_both_transports(oip_server):
    empty = np.array([b"   "], dtype=object)
    good = np.array([REVIEWS[0].encode()], dtype=object)
    bad_utf8 = np.array([b"\xff\xfe"], dtype=object)
    results = oip_server.run(
        [
            call("sentiment", [("text", "BYTES", empty)], "grpc", False),
            call("sentiment", [("text", "BYTES", empty)], "http", False),
            call("sentiment", [("text", "BYTES", bad_utf8)], "grpc", True),
            call("sentiment", [("nope", "BYTES", good)], "http", True),
            call("sentiment", [("text", "BYTES", good)], "grpc", False, token=False),
            call("sentiment", [("text", "BYTES", good)], "http", False, token=False),
            call(
                "sentiment",
                [("text", "BYTES", np.array([b"x" * 9000], dtype=object))],
                "grpc",
                True,
            ),
            call("digits", [("grid", "FP32", np.full((1, 8, 8), 99.0, np.float32))], "grpc", False),
            call(
                "sentiment",
                [("text", "BYTES", np.array([b"x" * (2 << 20)], dtype=object))],
                "grpc",
                True,
            ),
        ]
    )
    errors = [r["error"] for r in results]
    assert all(e is not None for e in errors), results
    assert errors[0]["status"] == "StatusCode.INVALID_ARGUMENT"
    refused = json.loads(errors[0]["message"])
    # No id sent: the server made one (a UUID), and the body carries it as TorchServe's path does.
    assert valid_request_id(refused.pop("request_id"))
    assert refused == {"error": "texts[0] is empty", "kind": "empty_input"}
    assert errors[1]["status"] == "400"
    assert "texts[0] is empty" in errors[1]["message"]
    assert errors[2]["status"] == "StatusCode.INVALID_ARGUMENT"
    assert json.loads(errors[2]["message"])["kind"] == "bad_encoding"
    assert errors[3]["status"] == "400" and "unknown input 'nope'" in errors[3]["message"]
    assert errors[4]["status"] == "StatusCode.UNAUTHENTICATED"
    assert errors[5]["status"] == "401"
    # The model's own limit (400 too_large): the catalogue's INVALID_ARGUMENT, as on TorchServe's
    # path; the server's body limit (413) is RESOURCE_EXHAUSTED.
    assert errors[6]["status"] == "StatusCode.INVALID_ARGUMENT"
    assert json.loads(errors[6]["message"])["kind"] == "too_large"
    assert errors[7]["status"] == "StatusCode.INVALID_ARGUMENT"
    assert json.loads(errors[7]["message"])["kind"] == "bad_field"
    assert errors[8]["status"] == "StatusCode.RESOURCE_EXHAUSTED"  # over the server's body limit


def test_rest_error_shape_is_the_protocols(oip_server):
    url = f"{oip_server.url}/v2/models/sentiment/infer"
    auth = {"Authorization": f"Bearer {oip_server.token}"}
    body = {
        "id": "r1",
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": [""]}],
    }
    r = requests.post(url, json=body, headers=auth, timeout=30)
    assert r.status_code == 400
    assert r.json() == {"error": "texts[0] is empty", "kind": "empty_input", "request_id": "r1"}
    assert r.headers["X-Request-ID"] == "r1"
    r = requests.post(url, json=body, timeout=30)
    assert r.status_code == 401 and "error" in r.json()
    huge = {
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["x" * (2 << 20)]}]
    }
    r = requests.post(url, json=huge, headers=auth | {"X-Request-ID": "big-1"}, timeout=30)
    assert r.status_code == 413 and r.json()["kind"] == "too_large"
    assert r.json()["request_id"] == r.headers["X-Request-ID"] == "big-1"
    # Without a Content-Length (chunked), the body is counted as it arrives.
    chunks = iter([b"x" * (1 << 20), b"x" * (1 << 20)])
    r = requests.post(
        url, data=chunks, headers=auth | {"Content-Type": "application/json"}, timeout=30
    )
    assert r.status_code == 413 and r.json()["kind"] == "too_large"
    body["inputs"][0]["data"] = ["a fine film"]
    r = requests.post(url, json=body, headers=auth, timeout=30)
    assert r.status_code == 200 and r.json()["id"] == "r1"
    assert {o["name"] for o in r.json()["outputs"]} >= {"label", "probabilities", "entropy"}


def test_concurrent_clients_are_batched_and_a_refused_neighbour_does_not_fail_them(oip_server):
    good = call(
        "sentiment",
        [("text", "BYTES", np.array([REVIEWS[1].encode()], dtype=object))],
        "grpc",
        True,
        parallel=12,
    )
    bad = call(
        "sentiment", [("text", "BYTES", np.array([b" "], dtype=object))], "grpc", True, parallel=4
    )
    goods, bads = oip_server.run([good, bad])
    assert all(r["error"] is None for r in goods), goods
    labels = {_text(unpack(r["outputs"]["label"]))[0] for r in goods}
    assert len(labels) == 1
    assert all(r["error"]["status"] == "StatusCode.INVALID_ARGUMENT" for r in bads)
    log = io.StringIO(oip_server.log.read_text())
    assert "Traceback" not in log.getvalue()


def test_explain_parameter_answers_the_models_explanation(oip_server, services):
    texts = np.array([REVIEWS[0].encode()], dtype=object)
    [result] = oip_server.run(
        [call("sentiment", [("text", "BYTES", texts)], "grpc", True, parameters={"explain": True})]
    )
    got = _outputs(result)
    assert list(got) == ["explanation"]
    explanation = json.loads(_text(got["explanation"])[0])
    body = json.dumps({"texts": [REVIEWS[0]]}).encode()
    headers = {"Content-Type": "application/json"}
    request = Request(body, headers, "in-process", {"explain": "true"})
    [reply] = services["sentiment"].handle_batch([request])
    assert explanation == json.loads(reply.body)


def test_only_the_protocols_routes_and_rpcs_are_served(oip_server):
    auth = {"Authorization": f"Bearer {oip_server.token}"}
    for method, path in [
        ("GET", "/docs"),
        ("GET", "/metrics"),
        ("GET", "/v1/models"),
        ("POST", "/v1/models/sentiment:predict"),
        ("POST", "/v2/repository/models/sentiment/unload"),
        ("POST", "/v2/repository/models/sentiment/load"),
    ]:
        r = requests.request(method, oip_server.url + path, headers=auth, json={}, timeout=30)
        assert r.status_code == 404, (method, path, r.status_code)
        assert r.json()["error"] == "not found"
        assert valid_request_id(r.json()["request_id"])
    http, grpc = oip_server.run(
        [
            {"unload": True, "transport": "http", "model": "digits"},
            {"unload": True, "transport": "grpc", "model": "digits"},
        ]
    )
    assert http["error"]["status"] == "404"
    assert grpc["error"]["status"] == "StatusCode.UNIMPLEMENTED"
    assert requests.get(f"{oip_server.url}/v2/models/digits/ready", timeout=30).status_code == 200


@pytest.mark.parametrize(("transport", "binary"), TRANSPORTS)
def test_tabular_columns_answer_as_the_in_process_records_to_the_bit(
    oip_server, services, transport, binary
):
    """One FP64 input per feature of the schema, one element per record (handlers/tabular/oip.py):
    the answer is the in-process answer to the same records as {"records": [...]}."""
    from tools.registry import get

    example = get("tabular").example()
    records = [example, example | {"mean radius": example["mean radius"] * 3}]
    inputs = [(n, "FP64", np.array([r[n] for r in records], np.float64)) for n in example]
    [result] = oip_server.run([call("tabular", inputs, transport, binary)])
    got = _outputs(result)
    body, _ = in_process(
        services["tabular"],
        json.dumps({"records": records}).encode(),
        {"Content-Type": "application/json"},
    )
    rows = json.loads(body)
    labels = services["tabular"].settings.export.classes
    assert _text(got["label"]) == [r["label"] for r in rows]
    want = np.array([[r["probabilities"][lab] for lab in labels] for r in rows])
    assert np.array_equal(got["probabilities"], want)
    for name in ("entropy", "mutual_information", "std"):
        assert np.array_equal(got[name], np.array([r["uncertainty"][name] for r in rows]))
    assert np.array_equal(got["distance"], np.array([r["distance"] for r in rows]))
    flags = [r["out_of_distribution"] for r in rows]
    assert got["out_of_distribution"].tolist() == flags and flags[1]  # three times the radius
    short = [(n, d, a[:1]) if n == "mean area" else (n, d, a) for n, d, a in inputs]
    [refused] = oip_server.run([call("tabular", short, transport, binary)])
    assert refused["error"] is not None and "one element per record" in str(refused["error"])


def test_versioned_routes_serve_the_models_own_version_and_404_any_other(oip_server, services):
    """KServe 0.21 answers every versioned route with NotImplementedError (a 501 and a traceback):
    the model's own version is its route, another version or model a JSON 404."""
    version = str(services["sentiment"].settings.version or "")
    assert version, "the tiny sentiment model names its version"
    auth = {"Authorization": f"Bearer {oip_server.token}"}
    base = f"{oip_server.url}/v2/models/sentiment/versions"
    assert requests.get(f"{base}/{version}/ready", timeout=30).status_code == 200
    assert requests.get(f"{base}/{version}", timeout=30).json()["name"] == "sentiment"
    body = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["loved it"]}]}
    r = requests.post(f"{base}/{version}/infer", json=body, headers=auth, timeout=60)
    assert r.status_code == 200, r.text
    for url in (f"{base}/not-{version}/ready", f"{oip_server.url}/v2/models/nope/versions/1"):
        r = requests.get(url, timeout=30)
        assert r.status_code == 404 and r.json()["kind"] == "not_found", (url, r.text)
    r = requests.post(f"{base}/not-{version}/infer", json=body, headers=auth, timeout=60)
    assert r.status_code == 404 and "has no version" in r.json()["error"]
    assert "NotImplementedError" not in oip_server.log.read_text()


def test_a_request_kserves_models_refuse_is_the_protocols_400_not_fastapis_422(oip_server):
    """KServe validates the request with pydantic; a null parameter came back as FastAPI's 422
    {"detail": [...]} (found by the OIP surface fuzzing). It is the protocol's 400 error shape."""
    r = requests.post(
        f"{oip_server.url}/v2/models/sentiment/infer",
        data=b'{"parameters": {"explain": null}, "inputs": []}',
        headers={
            "Authorization": f"Bearer {oip_server.token}",
            "Content-Type": "application/json",
            "X-Request-ID": "null-parameter-1",
        },
        timeout=60,
    )
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["kind"] == "bad_field" and "explain" in body["error"], body
    assert body["request_id"] == "null-parameter-1" == r.headers["X-Request-ID"]


def test_a_body_that_is_not_the_json_it_declares_is_the_protocols_400(oip_server):
    """FastAPI answered it {"detail": "There was an error parsing the body"} (found by the OIP
    surface fuzzing): the protocol's error shape, kind bad_encoding, with a request id."""
    r = requests.post(
        f"{oip_server.url}/v2/models/sentiment/infer",
        data=b"\x00" * 9,
        headers={"Authorization": f"Bearer {oip_server.token}", "Content-Type": "application/json"},
        timeout=60,
    )
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["kind"] == "bad_encoding" and body["request_id"] == r.headers["X-Request-ID"]
