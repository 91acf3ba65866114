"""Hypothesis strategies over TorchServe's whole inference surface, not a list of payloads.

- REST: every path and method TorchServe's own OpenAPI description lists (`OPTIONS /` on the
  inference port), with its templates filled by served and unknown model names, versions and extra
  segments; headers TorchServe or a handler reads (its `describe`/`explain` modes, `ts_stream_next`,
  the models' own X- headers) with values drawn from valid ones and nasty ones; bodies from
  `reliability.bodies` plus valid examples carrying out-of-range numbers.
- cost: the most expensive requests each model's limits allow, and the first past them
  (reliability/costly.py), drawn among the bodies on every route and RPC.
- gRPC: every RPC of the inference service, read from the compiled `inference.proto` descriptor
  (unary, server-streaming and bidirectional alike), with generated model names, versions and inputs.

Each draw is a small dataclass whose repr reads as what a client sent.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field

from hypothesis import strategies as st

from reliability import costly
from reliability.bodies import READ_HEADERS, Body, malformed_bodies, valid_example

UNKNOWN_MODEL = "no-such-model"

MODE_HEADERS = ("describe", "explain", "ts_stream_next", "url_path")
"""Headers TorchServe itself gives a meaning to (BaseHandler modes, its streaming flag)."""


def _sendable(value: str | bytes) -> bool:
    """What an HTTP client will put in a header: no surrounding blanks, no line breaks or NULs."""
    raw = value.encode("utf-8") if isinstance(value, str) else value
    return raw == raw.strip() and not any(c in raw for c in b"\r\n\x00")


HEADER_VALUES = st.one_of(
    st.sampled_from(["True", "true", "False", "1", "", "start", "application/octet-stream"]),
    st.sampled_from(["application/json", "text/plain", "image/png", "gzip", "9" * 401]),
    st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
    st.text(max_size=20).map(lambda t: t.encode("utf-8")),
).filter(_sendable)

HUGE_NUMBERS = st.one_of(
    st.integers(min_value=0, max_value=4000).map(lambda n: 10**n),
    st.integers(min_value=0, max_value=4000).map(lambda n: -(10**n)),
    st.floats(allow_nan=False),
    st.sampled_from(["1" + "0" * 900_000, "1e999", "-1e999", "1" * 64, "0x10"]),
)


def rest_routes(openapi: dict, models: list[str]) -> list[tuple[str, str]]:
    """(method, path) for every operation in TorchServe's description, templates filled with each
    served model, an unknown one, and a version where the template asks for one."""
    routes = []
    for template, operations in (openapi.get("paths") or {}).items():
        methods = [m.upper() for m in operations if m.lower() in HTTP_METHODS]
        for name in [*models, UNKNOWN_MODEL]:
            path = template.replace("{model_name}", name).replace("{model_version}", "1.0")
            path = re.sub(r"\{[^}]+\}", "x", path)
            routes += [(m, path) for m in methods]
    return sorted(set(routes))


HTTP_METHODS = ("get", "post", "put", "delete", "patch", "options", "head")
EXTRA_ROUTES = (
    # Routes the frontend serves that its description leaves out or spells differently.
    ("POST", "/explanations/{model}"),
    ("POST", "/v1/models/{model}:explain"),
    ("POST", "/v2/models/{model}/explain"),
    ("POST", "/predictions/{model}/1.0/extra/segments"),
    ("POST", "/predictions/{model}/" + "v" * 300),
)


@dataclass(frozen=True)
class RestAttack:
    method: str
    path: str
    body: Body
    headers: tuple[tuple[str, str | bytes], ...] = ()

    def request_headers(self) -> dict[str, str | bytes]:
        return self.body.request_headers() | dict(self.headers)


@st.composite
def numbers_in_fields(draw, model: str) -> Body:
    """A valid example with one field (or a new one) set to a number no client means."""
    example = dict(valid_example(model))
    name = draw(st.sampled_from([*example, "sample_rate", "frequencies", "state", "texts"]))
    value = draw(HUGE_NUMBERS)
    example[name] = draw(st.sampled_from([value, [value], [0.5, value]]))
    try:
        data = json.dumps(example).encode()
    except ValueError:  # an int past str()'s digit limit: write it by hand
        data = b'{"%s": 1%s}' % (name.encode(), b"0" * 5000)
    return Body("huge-number-field", "application/json", data)


@functools.cache
def costly_bodies(model: str) -> tuple[Body, ...]:
    """The most expensive requests the model's limits allow and the first past them
    (reliability/costly.py): the cost dimension of the surface."""
    return tuple(
        Body(
            f"costly: {c.label}",
            c.content_type,
            c.body,
            tuple((k, v.encode()) for k, v in c.headers.items()),
        )
        for c in costly.for_model(model)
    )


def bodies(model: str) -> st.SearchStrategy[Body]:
    valid = Body("valid", "application/json", json.dumps(valid_example(model)).encode())
    drawn = [st.just(valid), malformed_bodies(model), numbers_in_fields(model)]
    if costly_bodies(model):
        drawn.append(st.sampled_from(costly_bodies(model)))
    return st.one_of(drawn)


@st.composite
def rest_attacks(draw, routes: list[tuple[str, str]], models: list[str]) -> RestAttack:
    model = draw(st.sampled_from(models))
    extra = [(m, p.format(model=model)) for m, p in EXTRA_ROUTES]
    method, path = draw(st.sampled_from(routes + extra))
    names = st.sampled_from(MODE_HEADERS + READ_HEADERS)
    headers = draw(st.lists(st.tuples(names, HEADER_VALUES), max_size=4, unique_by=lambda h: h[0]))
    return RestAttack(method, path, draw(bodies(model)), tuple(headers))


@dataclass(frozen=True)
class GrpcAttack:
    method: str
    """The RPC's name in InferenceAPIsService."""
    client_streaming: bool
    server_streaming: bool
    model_name: str
    model_version: str
    inputs: tuple[tuple[str, bytes], ...] = field(default=())
    messages: int = 1
    """Requests sent on a client stream."""


def grpc_methods() -> list[tuple[str, bool, bool]]:
    """(name, client streaming, server streaming) of every RPC of the inference service."""
    from clients import stubs

    pb, _, _, _ = stubs.load()
    service = pb.DESCRIPTOR.services_by_name["InferenceAPIsService"]
    return [(m.name, m.client_streaming, m.server_streaming) for m in service.methods]


@st.composite
def grpc_attacks(draw, models: list[str]) -> GrpcAttack:
    name, client_streaming, server_streaming = draw(st.sampled_from(grpc_methods()))
    model = draw(st.sampled_from([*models, UNKNOWN_MODEL, ""]))
    body = draw(bodies(model if model in models else models[0]))
    # "explain": the gRPC way to ask for an explanation (handlers/service.py).
    keys = st.sampled_from(["body", "data", "explain", "sample_rate", "frequencies", "stream", "x"])
    values = st.just(body.data) | st.just(b"true") | st.binary(max_size=40)
    inputs = draw(st.lists(st.tuples(keys, values), max_size=3))
    return GrpcAttack(
        name,
        client_streaming,
        server_streaming,
        model,
        draw(st.sampled_from(["", "1.0", "v" * 300])),
        tuple(inputs),
        draw(st.integers(min_value=1, max_value=3)),
    )
