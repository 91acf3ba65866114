"""Malformed Open Inference Protocol requests, one by one, over each route (REST JSON, REST with
the binary-data extension, gRPC): each is the client's error with the catalogue's JSON body
(handlers/errors.py), never a 500 or INTERNAL, never an exception or class name, refused before
inference and priced from what it declares before anything is allocated (the server's RSS and
its health route are watched while it is answered)."""

from __future__ import annotations

import contextlib
import json
import re
import struct
import threading
import time

import grpc
import psutil
import pytest
import requests

from handlers.errors import KINDS
from tests.fixtures.oip import GRPC_SERVICE, in_oip_venv

pytestmark = [pytest.mark.integration, pytest.mark.serial]

PYTHON_NAMES = re.compile(
    r"Error\b|Exception\b|Traceback|struct\.|unpack|KeyError|NoneType|object has no|"
    r"pydantic|validation error"
)
"""What a refusal must not say: Python's exception and class names, pydantic's wording."""


def auth(server) -> dict[str, str]:
    return {"Authorization": f"Bearer {server.token}"}


def assert_refused(r: requests.Response, kinds=("bad_field",), status=400) -> dict:
    assert r.status_code == status, (r.status_code, r.text[:500])
    body = r.json()
    assert set(body) == {"error", "kind", "request_id"}, body
    assert body["kind"] in kinds, body
    assert KINDS[body["kind"]].statuses[0] == status or status in KINDS[body["kind"]].statuses
    assert not PYTHON_NAMES.search(body["error"]), body["error"]
    assert r.headers["X-Request-ID"] == body["request_id"]
    return body


def infer_json(server, model: str, body: dict | bytes, **headers: str) -> requests.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.post(
        f"{server.url}/v2/models/{model}/infer",
        data=data,
        headers=auth(server) | {"Content-Type": "application/json"} | headers,
        timeout=60,
    )


def infer_binary(
    server, model: str, head: dict | bytes, tail: bytes = b"", length: str | None = None, **kw
) -> requests.Response:
    text = head if isinstance(head, bytes) else json.dumps(head).encode()
    headers = {
        "Inference-Header-Content-Length": str(len(text)) if length is None else length,
        "Content-Type": "application/octet-stream",
    }
    return requests.post(
        f"{server.url}/v2/models/{model}/infer",
        data=text + tail,
        headers=(auth(server) if kw.get("token", True) else {}) | headers,
        timeout=60,
    )


def log_has_no_traceback(server) -> None:
    log = server.log.read_text(errors="replace")
    ours = re.search(r'File "[^"]*/(oip|handlers)/[^"]*"', log)
    assert ours is None, log[max(0, ours.start() - 2000) : ours.end() + 1000]


class Watch:
    """The server's RSS and its health route while a request is answered: the health route is
    asked every 50 ms from another thread and each answer's time kept."""

    def __init__(self, server):
        self.server = server
        self.proc = psutil.Process(server.process.pid)
        self.health: list[float] = []
        self.peak = 0
        self._stop = threading.Event()

    def __enter__(self) -> Watch:
        self.rss_before = self.proc.memory_info().rss
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            with contextlib.suppress(requests.RequestException):
                requests.get(f"{self.server.url}/v2/health/live", timeout=30)
            self.health.append(time.monotonic() - started)
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.05)

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(60)
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def grown(self) -> int:
        return self.peak - self.rss_before


@pytest.mark.parametrize("shape", [[1], [8]])
def test_a_bytes_element_given_as_a_big_integer_is_a_fast_400_without_allocating(oip_server, shape):
    """`"data": [500000000]` for an encoded image (87 bytes) was turned into bytes(500000000)
    and its base64, in the event loop: 1.9 GB and every route stalled for seconds."""
    body = {
        "inputs": [
            {"name": "image", "datatype": "BYTES", "shape": shape, "data": [500_000_000] * shape[0]}
        ]
    }
    with Watch(oip_server) as watch:
        started = time.monotonic()
        r = infer_json(oip_server, "digits", body)
        seconds = time.monotonic() - started
    refused = assert_refused(r)
    assert "string" in refused["error"], refused
    assert seconds < 2, f"refused after {seconds:.1f} s"
    assert watch.grown < 64 << 20, f"the server grew by {watch.grown >> 20} MB"
    assert max(watch.health, default=0) < 1, f"health answered after {max(watch.health):.1f} s"
    log_has_no_traceback(oip_server)


@pytest.mark.parametrize(
    "data",
    [["not an image"], [1.5], [{"a": 1}], [[1, 2]], [None], [True]],
    ids=["string", "float", "object", "nested-list", "null", "bool"],
)
def test_image_elements_that_are_not_encoded_images_are_the_clients_400(oip_server, data):
    r = infer_json(
        oip_server,
        "digits",
        {"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": data}]},
    )
    # A string is an image's bytes (UTF-8) that are no image: the model's own refusal (415).
    if data == ["not an image"]:
        assert_refused(r, kinds=("unsupported_media_type",), status=415)
    else:
        assert_refused(r)
    log_has_no_traceback(oip_server)


@pytest.mark.parametrize(
    "data", [[None], [True], [12345], [{"a": 1}], [1.5]], ids=["null", "true", "int", "obj", "fp"]
)
def test_sentiment_text_that_is_not_a_string_is_refused_as_torchserve_refuses_it(oip_server, data):
    """`null` was read as the text "None" (answered "negative" at 0.91)."""
    r = infer_json(
        oip_server,
        "sentiment",
        {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": data}]},
    )
    refused = assert_refused(r)
    assert "must be a string" in refused["error"], refused


@pytest.mark.parametrize(
    ("shape", "data"),
    [
        ([2], [0.5]),
        ([1], [0.5, 0.25]),
        ([2], [[0.5, 0.25], [1.0]]),
        ([2], ["a", "b"]),
        ([1], [True]),
    ],
    ids=["fewer", "more", "ragged", "strings", "bool"],
)
def test_numeric_data_that_disagrees_with_its_shape_or_datatype_is_a_400(oip_server, shape, data):
    r = infer_json(
        oip_server,
        "frequency",
        {"inputs": [{"name": "signal", "datatype": "FP32", "shape": shape, "data": data}]},
    )
    assert_refused(r)


@pytest.mark.parametrize("band", ["maybe", 1, ""])
def test_a_bad_band_parameter_is_a_400_naming_it(oip_server, band):
    signal = {"name": "signal", "datatype": "FP32", "shape": [2], "data": [0.5, 0.25]}
    r = infer_json(oip_server, "frequency", {"inputs": [signal], "parameters": {"band": band}})
    assert "band" in assert_refused(r)["error"]


@pytest.mark.parametrize("value", ["abc", "-5", "1e3", "1 2", "99999999999999999999999", ""])
@pytest.mark.parametrize("token", [True, False])
def test_a_non_numeric_inference_header_content_length_is_a_400(oip_server, value, token):
    head = {"inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["fine"]}]}
    r = infer_binary(oip_server, "sentiment", head, length=value, token=token)
    # A number that cuts the head short leaves it not JSON (bad_encoding).
    assert_refused(r, kinds=("bad_field", "bad_encoding") if token else ("unauthorized",),
                   status=400 if token else 401)  # fmt: skip
    log_has_no_traceback(oip_server)


TEXT = {"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a fine film"]}


@pytest.mark.parametrize(
    "head",
    [
        {"inputs": [TEXT], "outputs": "label"},
        {"inputs": [TEXT], "outputs": {"name": "label"}},
        {"inputs": [TEXT], "outputs": ["label"]},
        {"inputs": [TEXT], "outputs": [{"nm": "label"}]},
        {"inputs": [TEXT], "outputs": [{"name": 5}]},
        {"inputs": [TEXT], "outputs": [{"name": "label", "parameters": []}]},
        {"inputs": [TEXT], "parameters": []},
        {"inputs": [TEXT], "parameters": "explain"},
        {"inputs": [TEXT], "parameters": {"explain": [1]}},
        {"inputs": [{**TEXT, "name": 5}]},
        {"inputs": [{**TEXT, "name": None}]},
        {"inputs": [{**TEXT, "shape": "1"}]},
        {"inputs": [{**TEXT, "shape": [True]}]},
        {"inputs": [{**TEXT, "shape": [1.5]}]},
        {"inputs": [{**TEXT, "shape": [-1]}]},
        {"inputs": [{**TEXT, "datatype": 5}]},
        {"inputs": [{**TEXT, "parameters": "x"}]},
        {"inputs": [{**TEXT, "data": "a fine film"}]},
        {"inputs": "text"},
        {"inputs": [5]},
        {"inputs": [TEXT, TEXT]},
        [TEXT],
    ],
    ids=lambda h: json.dumps(h)[:60],
)
@pytest.mark.parametrize("route", ["json", "binary"])
def test_protocol_fields_of_the_wrong_type_are_a_400_on_both_rest_routes(oip_server, head, route):
    if route == "json":
        r = infer_json(oip_server, "sentiment", head)
    else:
        r = infer_binary(oip_server, "sentiment", head)
    assert_refused(r, kinds=("bad_field", "bad_encoding"))
    log_has_no_traceback(oip_server)


def binary_text(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


@pytest.mark.parametrize(
    ("size", "tail", "shape"),
    [
        (100, binary_text(b"a fine film"), [1]),  # past the body
        (4, binary_text(b"a fine film"), [1]),  # shorter than its element
        (-1, binary_text(b"a fine film"), [1]),
        ("15", binary_text(b"a fine film"), [1]),
        (True, binary_text(b"a fine film"), [1]),
        (15.0, binary_text(b"a fine film"), [1]),
        (15, binary_text(b"a fine film") + b"extra", [1]),  # bytes nobody declared
        (15, binary_text(b"a fine film"), [2]),  # one element for a shape of two
        (2, b"\x05\x00", [1]),  # shorter than a length prefix
        (9, struct.pack("<I", 4_000_000_000) + b"abcde", [1]),  # a prefix that lies
    ],
    ids=[
        "past",
        "short",
        "negative",
        "string",
        "bool",
        "float",
        "trailing",
        "count",
        "stub",
        "lying",
    ],  # fmt: skip
)
def test_binary_data_that_disagrees_with_its_declared_size_or_shape_is_a_400(
    oip_server, size, tail, shape
):
    head = {
        "inputs": [
            {
                "name": "text",
                "datatype": "BYTES",
                "shape": shape,
                "parameters": {"binary_data_size": size},
            }
        ]
    }
    r = infer_binary(oip_server, "sentiment", head, tail)
    assert_refused(r)
    log_has_no_traceback(oip_server)


def test_fp32_binary_data_of_the_wrong_size_is_a_400(oip_server):
    head = {
        "inputs": [
            {
                "name": "signal",
                "datatype": "FP32",
                "shape": [4],
                "parameters": {"binary_data_size": 6},
            }
        ]
    }
    assert_refused(infer_binary(oip_server, "frequency", head, b"\x00" * 6))


def batches(server, model: str) -> float:
    text = requests.get(f"http://127.0.0.1:{server.metrics}/metrics", timeout=30).text
    pattern = rf'^ts_handler_batch_size_count\{{[^}}]*ModelName="{model}"[^}}]*\}} (\S+)$'
    return sum(float(m) for m in re.findall(pattern, text, re.M))


@pytest.mark.parametrize("request_id", [5, True, {"a": 1}, [1], 1.5])
def test_a_request_id_that_is_not_a_string_is_refused_before_inference_on_the_binary_route(
    oip_server, request_id
):
    """It passed parsing, ran inference, and failed building the answer (500)."""
    head = {
        "id": request_id,
        "inputs": [
            {
                "name": "text",
                "datatype": "BYTES",
                "shape": [1],
                "parameters": {"binary_data_size": 15},
            }
        ],
    }
    before = batches(oip_server, "sentiment")
    r = infer_binary(oip_server, "sentiment", head, binary_text(b"a fine film"))
    refused = assert_refused(r)
    assert "id" in refused["error"]
    assert batches(oip_server, "sentiment") == before, "the request was run before its refusal"
    r = infer_json(oip_server, "sentiment", {"id": request_id, "inputs": [TEXT]})
    assert_refused(r)
    log_has_no_traceback(oip_server)


def grpc_infer(server, messages, **fields):
    request_class, _ = messages["ModelInfer"]
    message = request_class(**fields)
    call = grpc.insecure_channel(f"127.0.0.1:{server.grpc}").unary_unary(
        f"/{GRPC_SERVICE}/ModelInfer"
    )
    md = [("authorization", f"Bearer {server.token}")]
    try:
        call(message.SerializeToString(), metadata=md, timeout=30)
    except grpc.RpcError as e:
        return e.code().name, e.details() or ""
    return "OK", ""


@pytest.mark.parametrize(
    ("raw", "shape"),
    [
        ([b"\x05\x00"], [1]),  # shorter than its 4-byte length prefix
        ([struct.pack("<I", 4_000_000_000) + b"abc"], [1]),  # a prefix that lies
        ([struct.pack("<I", 9) + b"abc"], [1]),
        ([binary_text(b"fine") + b"\x01"], [1]),  # a stub after the element
        ([binary_text(b"fine")], [3]),  # fewer elements than the shape
        ([binary_text(b"fine"), binary_text(b"film")], [1]),  # more raw contents than inputs
    ],
    ids=["stub", "lying", "short", "trailing", "count", "extra-raw"],
)
def test_grpc_raw_bytes_contents_that_disagree_with_their_prefixes_are_invalid_argument(
    oip_server, oip_grpc_messages, raw, shape
):
    code, details = grpc_infer(
        oip_server,
        oip_grpc_messages,
        model_name="sentiment",
        inputs=[{"name": "text", "datatype": "BYTES", "shape": shape}],
        raw_input_contents=raw,
    )
    assert code == "INVALID_ARGUMENT", (code, details)
    body = json.loads(details)
    assert body["kind"] == "bad_field" and set(body) == {"error", "kind", "request_id"}, body
    assert not PYTHON_NAMES.search(body["error"]), body
    log_has_no_traceback(oip_server)


def test_grpc_raw_fp32_contents_of_the_wrong_size_are_invalid_argument(
    oip_server, oip_grpc_messages
):
    code, details = grpc_infer(
        oip_server,
        oip_grpc_messages,
        model_name="frequency",
        inputs=[{"name": "signal", "datatype": "FP32", "shape": [64]}],
        raw_input_contents=[b"\x00" * 10],
    )
    assert code == "INVALID_ARGUMENT", (code, details)
    assert json.loads(details)["kind"] == "bad_field"


def test_a_well_formed_binary_request_is_still_answered(oip_server):
    """The refusals above are the malformed requests' only: the same routes still answer."""
    tail = binary_text(b"a fine film", b"dull")
    head = {
        "id": "binary-ok",
        "inputs": [
            {
                "name": "text",
                "datatype": "BYTES",
                "shape": [2],
                "parameters": {"binary_data_size": len(tail)},
            }
        ],
        "outputs": [{"name": "label", "parameters": {"binary_data": False}}],
    }
    r = infer_binary(oip_server, "sentiment", head, tail)
    assert r.status_code == 200, r.text
    assert r.json()["id"] == "binary-ok" and len(r.json()["outputs"][0]["data"]) == 2
    r = infer_json(oip_server, "digits", {"inputs": [{"name": "grid", "datatype": "UINT8",
                                                      "shape": [1, 8, 8], "data": [4] * 64}]})  # fmt: skip
    assert r.status_code == 200, r.text


def test_every_error_kind_is_answered_with_the_catalogues_status_and_grpc_code():
    """The OIP server reads each refusal's REST status and gRPC code from the catalogue
    (handlers/errors.KINDS), as TorchServe's path and the door do: `stale_state` is ABORTED, the
    model's own `too_large` (400) INVALID_ARGUMENT and the body limit's (413) RESOURCE_EXHAUSTED.
    Its body (gRPC details and REST) is the one TorchServe's path sends for the same refusal
    (handlers/errors.refusal), field for field: no field of its own (`overloaded` included)."""
    out = in_oip_venv(
        "import asyncio, json\n"
        "from handlers.errors import KINDS, error_kinds, refusal, InternalError\n"
        "from handlers.errors import BodyTooLarge, Unauthorized\n"
        "from oip import refusals\n"
        "from fastapi import FastAPI\n"
        "Refused = refusals.refused_class()\n"
        "app = FastAPI()\n"
        "refusals.rest_refusals(app)\n"
        "rest = app.exception_handlers[Refused.__mro__[1]]\n"
        "classes = {**error_kinds(), 'unauthorized': Unauthorized, 'too_large-413': BodyTooLarge}\n"
        "rows = []\n"
        "for name, cls in sorted(classes.items()):\n"
        "    err = cls(None) if cls is InternalError else cls('why')\n"
        "    r = Refused(err, 'r-1')\n"
        "    answer = asyncio.run(rest(None, r))\n"
        "    status, headers, ts_body = refusal(err, 'r-1')\n"
        "    rows.append([err.kind, err.status, r.status_code.name, json.loads(r.details),\n"
        "                 answer.status_code, json.loads(answer.body), json.loads(ts_body),\n"
        "                 answer.headers.get('retry-after'), headers.get('Retry-After')])\n"
        "print(json.dumps(rows))\n"
    )
    rows = json.loads(out)
    kinds = {kind for kind, *_ in rows}
    assert kinds >= {k for k, e in KINDS.items() if e.by == "handler"} | {"unauthorized"}, kinds
    for kind, status, code, body, rest_status, rest_body, ts_body, retry, ts_retry in rows:
        entry = KINDS[kind]
        assert status in entry.statuses, (kind, status)
        assert code == entry.grpc_for(status), (kind, status, code, entry.grpc_for(status))
        assert body["kind"] == kind
        assert body == rest_body == ts_body, (kind, body, rest_body, ts_body)
        assert rest_status == status and retry == ts_retry, (kind, rest_status, retry, ts_retry)
    assert [413, "RESOURCE_EXHAUSTED"] in [r[1:3] for r in rows if r[0] == "too_large"]
    assert ["overloaded", "1"] in [[r[0], r[7]] for r in rows]
    assert ["stale_state", 409, "ABORTED"] in [r[:3] for r in rows]
