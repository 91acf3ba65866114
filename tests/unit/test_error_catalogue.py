"""The error contract once, as data: the catalogue (handlers/errors.KINDS), the door's generated
bodies and cfg (deploy/door.py, docker/haproxy.cfg), the clients' exceptions, and the request id
rule, checked against each other without a server (the integration tests run the real door)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clients import errors as client_errors
from clients.errors import (
    AuthError,
    BadRequest,
    ClientError,
    ModelNotFound,
    PayloadTooLarge,
    TimedOut,
    from_body,
    from_http,
)
from deploy import door
from handlers import errors
from handlers.errors import KINDS, REQUEST_ID_PATTERN, error_kinds, valid_request_id
from handlers.telemetry import request_id

CFG = door.CFG.read_text()


def test_the_committed_door_bodies_and_cfg_agree_with_the_catalogue():
    assert door.check(CFG) == []


def test_every_kind_the_cfg_names_is_in_the_catalogue():
    """Before: the door answered unauthorized, length_required, not_found, method_not_allowed and
    timeout, none of them in handlers/errors.py."""
    import re

    named = set(re.findall(r'"kind": "(\w+)"', "".join(door.render().values())))
    named |= set(re.findall(r"error-kind (\w+)", CFG)) | set(re.findall(r"str\((\w+)\)", CFG))
    assert named and named <= set(KINDS), named - set(KINDS)
    assert {
        "unauthorized",
        "length_required",
        "not_found",
        "method_not_allowed",
        "timeout",
    } <= named


@pytest.mark.parametrize(
    ("fault", "replace"),
    [
        (
            "a status the kind is not answered with",
            (
                "status 413 content-type application/json lf-file door/too_large.json",
                "status 400 content-type application/json lf-file door/unauthorized.json",
            ),
        ),
        (
            "a JSON body written by hand",
            (
                "lf-file door/length_required.json",
                """string '{"error": "chunked", "kind": "length_required"}'""",
            ),
        ),
        (
            "a Retry-After the kind does not have",
            (
                "lf-file door/timeout-torchserve.json",
                "lf-file door/timeout-torchserve.json hdr Retry-After 1",
            ),
        ),
        (
            "a gRPC code the kind does not have",
            ("hdr grpc-status 16 hdr grpc-message", "hdr grpc-status 3 hdr grpc-message"),
        ),
        (
            "a gRPC refusal without its kind",
            ("hdr error-kind not_implemented ", ""),
        ),
        (
            "a kind not in the catalogue",
            ("hdr error-kind too_large", "hdr error-kind too_big"),
        ),
        (
            "a door file that is not generated",
            ("lf-file door/not_found-metrics.json", "lf-file door/not_found-metrix.json"),
        ),
        (
            "client request ids taken without the shared rule",
            (REQUEST_ID_PATTERN, "^.*$"),
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_check_catches_a_cfg_that_disagrees(fault, replace):
    old, new = replace
    assert old in CFG, fault
    assert door.check(CFG.replace(old, new, 1)), fault


def test_the_check_catches_a_stale_door_file(tmp_path):
    door.write(tmp_path)
    assert door.check(CFG, tmp_path) == []
    (tmp_path / "unauthorized.json").write_text('{"error": "no", "kind": "unauthorized"}\n')
    assert any("not as generated" in p for p in door.check(CFG, tmp_path))


def test_door_bodies_are_json_once_haproxy_fills_them_in():
    for name, text in door.render().items():
        filled = (
            text.replace(door.REQUEST_ID, "req-1")
            .replace(door.TS_REASON, "Model not found: x")
            .replace("%[env(MAX_REQUEST_SIZE)]", "1048576")
        )
        body = json.loads(filled)
        assert set(body) == {"error", "kind", "request_id"} and body["request_id"] == "req-1", name
        assert "%" not in filled, name


def test_handler_errors_take_status_and_retry_from_the_catalogue():
    for kind, cls in error_kinds().items():
        assert KINDS[kind].by == "handler"
        assert (cls.status, cls.retry_after_s) == (KINDS[kind].status, KINDS[kind].retry_after_s)
    assert errors.Overloaded.retry_after_s == 1 and errors.StaleState.status == 409
    with pytest.raises(TypeError):  # nor a status its kind is not answered with

        class _Wrong(errors.RequestError):
            kind = "unauthorized"
            status = 400

    class _AdaptersOwn(errors.RequestError):  # an adapter's own door: a status of its kind
        kind = "too_large"
        status = 413

    assert _AdaptersOwn.status == 413 and error_kinds()["too_large"] is errors.TooLarge

    with pytest.raises(KeyError):  # nor a kind the catalogue does not have

        class _Unknown(errors.RequestError):
            kind = "no_such_kind"


def test_the_lifecycles_refusal_carries_status_retry_and_request_id():
    status, headers, body = errors.refusal(errors.Overloaded("busy"), "req-9")
    assert (status, headers) == (503, {"Retry-After": "1"})
    assert json.loads(body) == {"error": "busy", "kind": "overloaded", "request_id": "req-9"}


def test_every_catalogued_client_exception_exists():
    for entry in KINDS.values():
        cls = getattr(client_errors, entry.client)
        assert issubclass(cls, ClientError), entry.kind


@pytest.mark.parametrize("entry", list(KINDS.values()), ids=lambda e: e.kind)
def test_a_client_keeps_every_status_a_kind_is_answered_with(entry):
    for status in entry.statuses:
        body = json.dumps({"error": "x", "kind": entry.kind, "request_id": "r"}).encode()
        err = from_http(status, body)
        assert err.status == status and type(err).__name__ == entry.client, (entry.kind, status)
        assert err.request_id == "r" and err.retryable == entry.retryable


def test_the_doors_413_is_a_413_not_a_bad_request_400():
    """Before: the kind decided the status, and too_large was the model's own 400, so the door's
    413 reached a user as `400 BadRequest`."""
    body = door.ANSWERS["too_large"].body().replace(door.REQUEST_ID, "r")
    err = from_http(413, body.replace("%[env(MAX_REQUEST_SIZE)]", "1048576").encode())
    assert isinstance(err, PayloadTooLarge) and err.status == 413
    model_limit = from_http(400, b'{"error": "text over 8192 bytes", "kind": "too_large"}')
    assert isinstance(model_limit, BadRequest) and model_limit.status == 400
    over_grpc = from_body(b'{"error": "text over 8192 bytes", "kind": "too_large"}')
    assert over_grpc is not None and over_grpc.status == 400


def test_door_kinds_raise_their_own_exceptions():
    def err(status, kind):
        return from_http(status, json.dumps({"error": "x", "kind": kind}).encode())

    assert isinstance(err(401, "unauthorized"), AuthError)
    assert isinstance(err(404, "not_found"), ModelNotFound)
    assert type(err(405, "method_not_allowed")) is BadRequest
    assert type(err(411, "length_required")) is BadRequest
    assert isinstance(err(408, "timeout"), TimedOut) and err(504, "timeout").status == 504


def test_the_grpc_clients_status_table_is_the_catalogues():
    grpc = pytest.importorskip("grpc")
    from clients.grpc_client import _HTTP_STATUS

    for code, status in _HTTP_STATUS.items():
        assert errors.GRPC_BY_STATUS[status] == code.name, code
        assert errors.GRPC_CODES[code.name] == code.value[0]
    assert grpc.StatusCode.RESOURCE_EXHAUSTED in _HTTP_STATUS


def test_the_client_imports_the_catalogue_without_heavy_modules():
    code = (
        "import sys\n"
        "import clients.rest_client, clients.errors\n"
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, 'heavy import'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("req-1", True),
        ("a" * 128, True),
        ("0f8fad5b-d9cb-469f-a165-70867728950e", True),
        ("a" * 129, False),
        ("", False),
        ("has space", False),
        ("caf\u00e9", False),
        ("line\nbreak", False),
        ("end\n", False),
        (b"bytes-id", True),
        (None, False),
        ({"content-type": "x"}, False),
    ],
)
def test_a_client_request_id_is_kept_only_when_bounded_printable_ascii(value, kept):
    assert (valid_request_id(value) is not None) == kept


def test_the_worker_takes_the_headers_request_id_before_torchserves():
    class Ctx:
        request_ids = {0: "ts-0", 1: "ts-1"}

    assert request_id(Ctx(), 0, {"x-request-id": "client-7"}) == "client-7"
    assert request_id(Ctx(), 0, {"X-Request-ID": "client-7"}) == "client-7"
    assert request_id(Ctx(), 1, {"X-Request-ID": "bad id"}) == "ts-1"
    assert request_id(Ctx(), 1, {}) == "ts-1"


def test_the_reliability_docs_list_every_kind_as_catalogued():
    """docs/reliability.md "Error kinds" tells the current catalogue: each kind, its statuses,
    its Retry-After and the client's exception."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "reliability.md").read_text()
    rows = {
        m.group(1): [c.strip() for c in m.group(2).split("|")]
        for m in re.finditer(r"^\| `(\w+)` \|(.*)\|$", text, re.M)
        if m.group(1) in KINDS or m.group(1).islower()
    }
    table = {k: v for k, v in rows.items() if len(v) == 5}
    assert set(table) == set(KINDS), set(table) ^ set(KINDS)
    for kind, (statuses, _, retry, grpc_codes, client) in table.items():
        entry = KINDS[kind]
        assert statuses == ", ".join(map(str, entry.statuses)), kind
        assert retry == ("" if entry.retry_after_s is None else str(entry.retry_after_s)), kind
        assert grpc_codes.split(", ")[0] == f"`{entry.grpc}`", kind
        assert client.startswith(f"`{entry.client}`"), kind
