"""The Open Inference Protocol server's whole surface, walked with generated requests (the style
of tests/integration/test_surface.py): every REST route KServe's app registers (tests/support/kserve_routes.py's
`kserve_routes`: the protocol's and the ones it must not serve), every RPC of the protocol's gRPC
service (read from KServe's compiled grpc_predict_v2 descriptor), with generated tensors,
parameters, ids, bodies and headers, each sent at the same instant as valid requests for the same
model, so they share batches.

Invariants after every example, not expected answers per payload:
- the generated request got a client error, a prediction, or a refusal with the protocol's JSON
  error shape ({"error": ...}): never a 5xx other than 503 `overloaded` or 501 `not_implemented`
  over REST, never INTERNAL, UNKNOWN or DATA_LOSS over gRPC, and an answer within 60 s;
- a route outside the protocol's health, metadata and inference routes is 404 (gRPC: the model
  repository RPCs UNIMPLEMENTED);
- the valid requests sent alongside got the answers they get alone (at 5 decimals);
- the server process is alive and logged no traceback.

The same walk runs through the pod's door (docker/haproxy.cfg with PROXY_OIP, in front of the same
server): there a route outside the protocol's is the door's JSON 404 (405 for a protocol route
with another method), every other answer the server's, and the invariants are the same.
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import grpc
import psutil
import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from handlers import registry
from handlers.errors import KINDS
from oip.middleware import ROUTES
from reliability.bodies import json_scalars, json_values, malformed_bodies
from reliability.record import fuzz_examples, record
from tests.fixtures.oip import GRPC_SERVICE, in_oip_venv
from tools import registry as tools_registry

pytestmark = [pytest.mark.integration, pytest.mark.serial]

UNKNOWN_MODEL = "no-such-model"
SERVICE = GRPC_SERVICE
DATATYPES = [
    "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
    "FP16", "FP32", "FP64", "BF16", "BYTES", "fp32", "NOPE", "",
]  # fmt: skip
PARAMETERS = ["explain", "stream", "state", "frequencies", "sample_rate", "binary_data_output"]
NEIGHBOURS = 2
UNPARSED = b"Invalid HTTP request received."
"""uvicorn's own answer to bytes that are not HTTP (a control character in a header): plain text,
before any app code runs. Behind the pod's door such a request never reaches the server."""
SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
VALID = {
    "sentiment": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["a fine film"]}],
    "frequency": [
        {
            "name": "signal",
            "datatype": "FP32",
            "shape": [64],
            "data": [0.25 * (i % 8) for i in range(64)],
        }
    ],
    "digits": [{"name": "grid", "datatype": "FP32", "shape": [1, 8, 8], "data": [4.0] * 64}],
    "tabular": [
        {"name": n, "datatype": "FP64", "shape": [1], "data": [float(v)]}
        for n, v in tools_registry.get("tabular").example().items()
    ],
}
"""One valid request per model (the neighbours)."""


@pytest.fixture(scope="module")
def kserve_routes() -> list[tuple[str, str]]:
    out = in_oip_venv(
        "import json; from tests.support.kserve_routes import kserve_routes as k; "
        "print(json.dumps(k()))"
    )
    return [tuple(r) for r in json.loads(out)]


@pytest.fixture(scope="module")
def grpc_messages(oip_grpc_messages):
    return oip_grpc_messages


def fill(template: str, model: str) -> str:
    path = template.replace("{model_name}", model).replace("{model_version}", "1")
    return re.sub(r"\{[^}]+\}", "x", path)


def served_route(method: str, path: str) -> bool:
    return bool(ROUTES.fullmatch(f"{method} {path.rstrip('/') or '/'}"))


class Surface:
    def __init__(self, server):
        self.server = server
        self.auth = {"Authorization": f"Bearer {server.token}"}
        self.models = registry.names()
        self.alone = {m: self.neighbour(m) for m in self.models}
        self.channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc}")
        self.door = False
        """Whether the server is seen through the pod's door."""

    def neighbour(self, model: str) -> tuple[int, object]:
        r = requests.post(
            f"{self.server.url}/v2/models/{model}/infer",
            json={"inputs": VALID[model]},
            headers=self.auth,
            timeout=60,
        )
        if r.status_code != 200:
            return r.status_code, r.text
        return 200, rounded({o["name"]: o["data"] for o in r.json()["outputs"]})

    def alongside(self, send, model: str):
        started = time.monotonic()
        with ThreadPoolExecutor(1 + NEIGHBOURS) as pool:
            mine = pool.submit(send)
            others = [pool.submit(self.neighbour, model) for _ in range(NEIGHBOURS)]
            answer = mine.result()
            seconds = time.monotonic() - started
            assert seconds < 60, f"answered after {seconds:.1f} s"
            return answer, [f.result() for f in others]

    def check(self, model: str, neighbours: list, what: str) -> None:
        for answer in neighbours:
            assert answer == self.alone[model], f"{what}: a neighbour's answer changed: {answer}"
        assert self.server.process.poll() is None, f"{what}: the server exited"
        # KServe logs the exceptions it maps to a status itself (ModelNotFound...); a traceback
        # through this project's code (the adapter, the batcher, a handler) is a failure.
        log = self.server.log.read_text(errors="replace")
        ours = re.search(r'File "[^"]*/(oip|handlers)/[^"]*"', log)
        assert ours is None, f"{what}: {log[max(0, ours.start() - 2000) : ours.end() + 1000]}"


def rounded(value):
    if isinstance(value, float):
        return round(value, 5)
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


@pytest.fixture(scope="module", params=["server", "door"])
def surface(request):
    """The server itself, then the same server through the pod's door."""
    s = Surface(request.getfixturevalue("oip_server" if request.param == "server" else "oip_door"))
    s.door = request.param == "door"
    yield s
    s.channel.close()


def refused_route(surface, r: requests.Response) -> bool:
    """A route outside the protocol's: 404 (through the door also 405, a protocol path with
    another method), with its JSON kind."""
    statuses = {404: "not_found", 405: "method_not_allowed"} if surface.door else {404: "not_found"}
    if r.status_code not in statuses:
        return False
    return r.request.method == "HEAD" or r.json()["kind"] == statuses[r.status_code]


names = st.one_of(
    st.sampled_from(["text", "signal", "state", "image", "grid"]), st.text(max_size=8)
)
shapes = st.lists(st.integers(min_value=-3, max_value=1 << 23), max_size=4)
tensors = st.fixed_dictionaries(
    {"name": names, "datatype": st.sampled_from(DATATYPES), "shape": shapes, "data": json_values},
    optional={"parameters": st.dictionaries(st.text(max_size=8), json_scalars, max_size=2)},
)
parameters = st.dictionaries(
    st.one_of(st.sampled_from(PARAMETERS), st.text(max_size=8)), json_scalars, max_size=3
)


def consistent(model: str) -> st.SearchStrategy[list[dict]]:
    """Inputs of the right names and types whose values are drawn: out-of-range numbers, odd text."""
    floats = st.floats(allow_nan=True, allow_infinity=True, width=32)
    if model == "sentiment":
        data = st.lists(st.text(max_size=200), min_size=0, max_size=9)
        return data.map(
            lambda d: [{"name": "text", "datatype": "BYTES", "shape": [len(d)], "data": d}]
        )
    if model == "frequency":
        data = st.lists(floats, min_size=0, max_size=300)
        return data.map(
            lambda d: [{"name": "signal", "datatype": "FP32", "shape": [len(d)], "data": d}]
        )
    if model == "tabular":  # one FP64 input per feature, as many records each (0 to 3)
        names = [i["name"] for i in VALID["tabular"]]
        number = st.floats(allow_nan=True, allow_infinity=True)
        columns = st.integers(min_value=0, max_value=3).flatmap(
            lambda n: st.lists(
                st.lists(number, min_size=n, max_size=n), min_size=len(names), max_size=len(names)
            )
        )
        return columns.map(
            lambda columns: [
                {"name": n, "datatype": "FP64", "shape": [len(c)], "data": c}
                for n, c in zip(names, columns, strict=True)
            ]
        )
    side = st.integers(min_value=0, max_value=40)
    return st.tuples(side, side, floats).map(
        lambda t: [
            {
                "name": "grid",
                "datatype": "FP32",
                "shape": [1, t[0], t[1]],
                "data": [t[2]] * (t[0] * t[1]),
            }
        ]
    )


@st.composite
def infer_bodies(draw, model: str):
    """A generated infer request: JSON tensors (consistent or not), the binary extension with a
    drawn header length, or a TorchServe-style malformed body (reliability/bodies.py)."""
    kind = draw(st.sampled_from(["json", "consistent", "binary", "malformed"]))
    if kind == "malformed":
        body = draw(malformed_bodies(model))
        return body.data, body.request_headers()
    head: dict = {}
    if draw(st.booleans()):
        head["id"] = draw(json_scalars)
    head["parameters"] = draw(parameters)
    if kind == "consistent":
        head["inputs"] = draw(consistent(model))
    else:
        head["inputs"] = draw(st.lists(tensors, max_size=3))
    if draw(st.booleans()):
        head["outputs"] = draw(st.lists(st.fixed_dictionaries({"name": names}), max_size=2))
    text = json.dumps(head, allow_nan=True).encode()
    if kind != "binary":
        return text, {"Content-Type": "application/json"}
    tail = draw(st.binary(max_size=512))
    length = draw(
        st.one_of(st.just(len(text)), st.integers(min_value=-5, max_value=len(text) + 600))
    )
    headers = {"Inference-Header-Content-Length": str(length)}
    if draw(st.booleans()):
        headers["Content-Type"] = "application/octet-stream"
    return text + tail, headers


@st.composite
def rest_attacks(draw, routes: list[tuple[str, str]]):
    served = [
        (m, t)
        for m, t in routes
        if "{model_version}" not in t and served_route(m, fill(t, "sentiment"))
    ]  # the protocol's own routes, drawn as often as the rest: real answers, not only refusals
    method, template = draw(
        st.one_of(
            st.sampled_from(routes),
            st.sampled_from(served),
            st.tuples(
                st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH"]),
                st.sampled_from([t for _, t in routes]),
            ),
        )
    )
    model = draw(st.sampled_from([*registry.names(), UNKNOWN_MODEL]))
    path = fill(template, model)
    data, headers = draw(infer_bodies(model if model in VALID else "sentiment"))
    return method, path, model, data, headers


def acceptable(r: requests.Response) -> tuple[bool, str]:
    try:
        body = r.json()
    except ValueError:
        body = None
    head = r.request.method == "HEAD"  # a HEAD answer has no body
    if (r.status_code, r.content) == (400, UNPARSED):
        return True, ""
    if r.status_code >= 400 and not head and not (isinstance(body, dict) and "error" in body):
        return False, "not the protocol's error shape"
    if r.status_code < 500:
        return True, ""
    kind = body.get("kind") if isinstance(body, dict) else None
    return (r.status_code, kind) in ((501, "not_implemented"), (503, "overloaded")), "a 5xx"


def test_every_kserve_route_is_the_protocols_or_404(surface, kserve_routes):
    """Every route KServe registers: the protocol's answer it (no 404), the others are 404."""
    assert ("POST", "/v2/models/{model_name}/infer") in kserve_routes
    assert any("/repository/" in p for _, p in kserve_routes)
    for method, template in kserve_routes:
        path = fill(template, "sentiment")
        r = requests.request(method, surface.server.url + path, headers=surface.auth, timeout=30)
        if "{model_version}" in template:  # version "1", not the one served: a JSON 404
            assert r.status_code == 404 and r.json()["kind"] == "not_found", (method, path)
        elif served_route(method, path):
            assert r.status_code != 404, (method, path)
        else:  # a HEAD answer has no body
            assert refused_route(surface, r), (method, path, r.status_code)


def test_every_rest_route_keeps_the_server_and_neighbours(surface, kserve_routes):
    seen: Counter = Counter()

    @settings(max_examples=max(40, fuzz_examples() // 3), **SETTINGS)
    @given(attack=rest_attacks(kserve_routes))
    def run(attack):
        method, path, model, data, headers = attack

        def send():
            return requests.request(
                method,
                surface.server.url + path,
                data=data,
                headers=surface.auth | headers,
                timeout=60,
            )

        neighbour_model = model if model in VALID else "sentiment"
        r, neighbours = surface.alongside(send, neighbour_model)
        seen[(method, path.split("/")[2] if path.count("/") > 1 else path, r.status_code)] += 1
        ok, why = acceptable(r)
        assert ok, (
            f"{method} {path} {headers} {data[:200]!r}: {why}: {r.status_code} {r.content[:300]!r}"
        )
        unparsed = (r.status_code, r.content) == (400, UNPARSED)  # uvicorn's, before any route
        if not served_route(method, path) and not unparsed:
            assert refused_route(surface, r), (method, path, r.status_code, r.content[:200])
        surface.check(neighbour_model, neighbours, f"{method} {path}")

    run()
    assert any(s == 200 for (_, _, s) in seen), seen  # the generator reaches real answers too


@st.composite
def grpc_attacks(draw, rpcs: dict):
    method = draw(st.sampled_from(sorted(rpcs)))
    request_class, _ = rpcs[method]
    model = draw(st.sampled_from([*registry.names(), UNKNOWN_MODEL, ""]))
    if draw(st.integers(min_value=0, max_value=9)) == 0:
        return method, model, draw(st.binary(max_size=300))  # not a message at all
    message = request_class()
    fields = request_class.DESCRIPTOR.fields_by_name
    if "name" in fields:
        message.name = model
    if "model_name" in fields:
        message.model_name = model
    if method == "ModelInfer":
        message.id = draw(st.text(max_size=20))
        for _ in range(draw(st.integers(min_value=0, max_value=3))):
            tensor = message.inputs.add()
            tensor.name = draw(names)
            tensor.datatype = draw(st.sampled_from(DATATYPES))
            tensor.shape.extend(
                draw(st.lists(st.integers(min_value=-3, max_value=1 << 40), max_size=4))
            )
            contents = draw(st.sampled_from(["fp32", "bytes", "int", "raw", "none"]))
            if contents == "fp32":
                tensor.contents.fp32_contents.extend(
                    draw(st.lists(st.floats(allow_nan=True, width=32), max_size=300))
                )
            elif contents == "bytes":
                tensor.contents.bytes_contents.extend(
                    draw(st.lists(st.binary(max_size=200), max_size=9))
                )
            elif contents == "int":
                tensor.contents.int_contents.extend(
                    draw(
                        st.lists(st.integers(min_value=-(2**31), max_value=2**31 - 1), max_size=64)
                    )
                )
            elif contents == "raw":
                message.raw_input_contents.append(draw(st.binary(max_size=1200)))
        for key in draw(st.lists(st.sampled_from(PARAMETERS), max_size=3, unique=True)):
            value = draw(
                st.one_of(
                    st.booleans(),
                    st.text(max_size=20),
                    st.integers(min_value=-(2**62), max_value=2**62),
                    st.floats(),
                )
            )
            parameter = message.parameters[key]
            if isinstance(value, bool):
                parameter.bool_param = value
            elif isinstance(value, int):
                parameter.int64_param = value
            elif isinstance(value, float) and "double_param" in parameter.DESCRIPTOR.fields_by_name:
                parameter.double_param = value
            elif isinstance(value, float):
                parameter.string_param = repr(value)
            else:
                parameter.string_param = value
    return method, model, message.SerializeToString()


def test_every_grpc_rpc_keeps_the_server_and_neighbours(surface, grpc_messages):
    seen: Counter = Counter()
    md = [("authorization", f"Bearer {surface.server.token}")]

    @settings(max_examples=max(30, fuzz_examples() // 5), **SETTINGS)
    @given(attack=grpc_attacks(grpc_messages))
    def run(attack):
        method, model, raw = attack
        call = surface.channel.unary_unary(f"/{SERVICE}/{method}")

        def send():
            try:
                call(raw, metadata=md, timeout=30)
            except grpc.RpcError as e:
                return e.code().name, e.details() or ""
            return "OK", ""

        neighbour_model = model if model in VALID else "sentiment"
        (code, details), neighbours = surface.alongside(send, neighbour_model)
        seen[(method, code)] += 1
        assert code not in ("INTERNAL", "UNKNOWN", "DATA_LOSS", "DEADLINE_EXCEEDED"), (
            f"{method} {raw[:120]!r}: {code} {details[:300]}"
        )
        if code == "UNAVAILABLE":
            assert json.loads(details)["kind"] == "overloaded", details
        if method in ("RepositoryModelLoad", "RepositoryModelUnload"):
            assert code in ("UNIMPLEMENTED", "UNAUTHENTICATED"), (method, code)
        surface.check(neighbour_model, neighbours, f"{method} {raw[:80]!r}")

    run()
    assert {m for m, c in seen if c == "OK"}, seen


# The tensors themselves, priced: generated field types, element types, sizes, length prefixes
# and ids on each route (REST JSON, REST with the binary-data extension, gRPC raw contents), with
# the cost invariants of TorchServe's surface suite (tests/integration/test_surface.py).

COST_SECONDS = 5
"""A generated tensor request is answered within this (the largest allowed takes well under)."""
RSS_BOUND = 256 << 20
"""The server's RSS may grow by at most this over the run (one refused 87-byte request grew it
by 1.9 GB when a BYTES element's number was read as a size)."""
HEALTH_SECONDS = 2
"""The health route answers within this while the generated requests are answered."""
TENSOR_MODELS = {"digits": ("image", "BYTES"), "sentiment": ("text", "BYTES"),
                 "frequency": ("signal", "FP32")}  # fmt: skip

elements = st.one_of(
    st.text(max_size=30),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([500_000_000, 1 << 31, 2**64, -1]),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
    st.lists(st.one_of(st.integers(), st.text(max_size=5)), max_size=3),
)
field_values = st.one_of(json_scalars, st.lists(json_scalars, max_size=3), st.just({"a": 1}))


def prefixed(items: list[bytes], lie: int | None, cut: int) -> bytes:
    """BYTES binary data: each element's 4-byte length then its bytes; `lie` replaces the first
    prefix, `cut` drops bytes from the end."""
    raw = b"".join(struct.pack("<I", len(b)) + b for b in items)
    if lie is not None and raw:
        raw = struct.pack("<I", lie) + raw[4:]
    return raw[: max(0, len(raw) - cut)]


@st.composite
def tensor_requests(draw):
    """(route, model, payload): a JSON or binary REST body with its headers, or a gRPC
    ModelInfer's fields, for one model's own input, its fields and elements drawn."""
    model = draw(st.sampled_from(sorted(TENSOR_MODELS)))
    name, datatype = TENSOR_MODELS[model]
    datatype = draw(st.one_of(st.just(datatype), st.sampled_from(DATATYPES)))
    n = draw(st.integers(min_value=0, max_value=6))
    shape = draw(
        st.one_of(
            st.just([n]),
            st.lists(st.integers(min_value=-2, max_value=1 << 40), min_size=1, max_size=3),
        )
    )
    route = draw(st.sampled_from(["json", "binary", "grpc"]))
    request_id = draw(st.one_of(st.none(), st.text(max_size=12), field_values))
    if datatype == "BYTES":
        items = draw(st.lists(st.binary(max_size=40), min_size=n, max_size=n))
        raw = prefixed(
            items,
            draw(st.one_of(st.none(), st.integers(min_value=0, max_value=2**32 - 1))),
            draw(st.sampled_from([0, 0, 1, 3, 5])),
        )
    else:
        raw = draw(st.binary(max_size=64)) if draw(st.booleans()) else b"\0" * (4 * n)
    if route == "grpc":
        return route, model, {"id": str(request_id)[:40], "name": name, "datatype": datatype,
                              "shape": shape, "raw": raw}  # fmt: skip
    spec: dict = {
        "name": draw(st.one_of(st.just(name), field_values)),
        "datatype": draw(st.one_of(st.just(datatype), field_values)),
        "shape": draw(st.one_of(st.just(shape), field_values)),
    }
    head: dict = {"inputs": [spec]}
    if request_id is not None:
        head["id"] = request_id
    if draw(st.booleans()):
        head["parameters"] = draw(st.one_of(parameters, field_values))
    if draw(st.booleans()):
        head["outputs"] = draw(
            st.one_of(st.lists(st.fixed_dictionaries({"name": names}), max_size=2), field_values)
        )
    if route == "json":
        spec["data"] = draw(st.lists(elements, max_size=8))
        return route, model, (json.dumps(head).encode(), {"Content-Type": "application/json"})
    size = draw(
        st.one_of(
            st.just(len(raw)),
            st.integers(min_value=-5, max_value=1 << 33),
            field_values,
        )
    )
    spec["parameters"] = {"binary_data_size": size}
    text = json.dumps(head).encode()
    length = draw(
        st.one_of(
            st.just(str(len(text))),
            st.integers(min_value=-3, max_value=len(text) + 80).map(str),
            st.sampled_from(["", "abc", "1e3", "7x", "0x10", "99999999999999999999"]),
        )
    )
    return route, model, (text + raw, {"Inference-Header-Content-Length": length})


def catalogue_refusal(status: int, body: object) -> bool:
    """A refusal as the catalogue writes it: its JSON body names a kind answered with `status`,
    and says nothing of Python (no exception or class names)."""
    if not isinstance(body, dict) or set(body) - {"error", "kind", "request_id", "retry_after_s"}:
        return False
    entry = KINDS.get(str(body.get("kind")))
    return (
        entry is not None
        and status in entry.statuses
        and not re.search(r"Error\b|Exception\b|Traceback|struct\.", str(body.get("error")))
    )


def test_tensors_are_priced_before_they_are_read_on_every_route(oip_server, oip_grpc_messages):
    """Generated tensors on the three routes: each a prediction or the catalogue's refusal
    (REST: its status and JSON body; gRPC: its code and the JSON as details) within
    COST_SECONDS, the server's RSS within RSS_BOUND of where it started, its health route
    answering within HEALTH_SECONDS all along, no traceback of this project's code."""
    server = oip_server
    auth = {"Authorization": f"Bearer {server.token}"}
    process = psutil.Process(server.process.pid)
    rss_start = process.memory_info().rss
    request_class, _ = oip_grpc_messages["ModelInfer"]
    channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc}")
    infer = channel.unary_unary(f"/{SERVICE}/ModelInfer")
    md = [("authorization", f"Bearer {server.token}")]
    health: list[float] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            started = time.monotonic()
            with contextlib.suppress(requests.RequestException):
                requests.get(f"{server.url}/v2/health/live", timeout=30)
            health.append(time.monotonic() - started)
            time.sleep(0.05)

    seen: Counter = Counter()
    started_all = time.monotonic()

    @settings(max_examples=max(60, fuzz_examples() // 2), **SETTINGS)
    @given(drawn=tensor_requests())
    def run(drawn):
        route, model, payload = drawn
        started = time.monotonic()
        if route == "grpc":
            message = request_class(
                model_name=model,
                id=payload["id"],
                inputs=[{k: payload[k] for k in ("name", "datatype", "shape")}],
                raw_input_contents=[payload["raw"]],
            )
            try:
                infer(message.SerializeToString(), metadata=md, timeout=60)
                code, details = "OK", ""
            except grpc.RpcError as e:
                code, details = e.code().name, e.details() or ""
            seconds = time.monotonic() - started
            seen[(route, code)] += 1
            assert code in ("OK", "INVALID_ARGUMENT", "RESOURCE_EXHAUSTED"), (
                payload,
                code,
                details,
            )
            if code != "OK":
                body = json.loads(details)
                assert (
                    body["kind"] in KINDS
                    and KINDS[body["kind"]].grpc == code
                    or (code == "RESOURCE_EXHAUSTED" and body["kind"] == "too_large")
                ), (payload, code, details)
                assert not re.search(r"Error\b|Exception\b|Traceback|struct\.", body["error"])
        else:
            data, headers = payload
            r = requests.post(
                f"{server.url}/v2/models/{model}/infer",
                data=data,
                headers=auth | headers,
                timeout=60,
            )
            seconds = time.monotonic() - started
            seen[(route, r.status_code)] += 1
            assert r.status_code == 200 or 400 <= r.status_code < 500, (data[:300], r.text)
            if r.status_code != 200:
                assert catalogue_refusal(r.status_code, r.json()), (data[:300], headers, r.text)
        assert seconds < COST_SECONDS, f"{route} {model}: answered after {seconds:.1f} s"
        grown = process.memory_info().rss - rss_start
        assert grown < RSS_BOUND, f"{route} {model}: the server grew by {grown >> 20} MB"
        assert max(health, default=0) < HEALTH_SECONDS, f"health answered after {max(health)} s"

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    held = False
    try:
        run()
        held = True
    finally:
        stop.set()
        watcher.join(60)
        channel.close()
        record(
            "surface-oip-tensors",
            invariants_held=held,
            inputs=sum(seen.values()),
            statuses={f"{r}: {s}": n for (r, s), n in sorted(seen.items(), key=str)},
            health_max_s=round(max(health, default=0), 3),
            seconds=round(time.monotonic() - started_all, 1),
        )
    log = server.log.read_text(errors="replace")
    ours = re.search(r'File "[^"]*/(oip|handlers)/[^"]*"', log)
    assert ours is None, log[max(0, ours.start() - 2000) : ours.end() + 1000]
    assert {r for r, _ in seen} == {"json", "binary", "grpc"}, seen  # every route walked
