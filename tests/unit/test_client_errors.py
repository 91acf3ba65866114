"""Error folding: the same failure maps to the same typed error whatever protocol carried it."""

from __future__ import annotations

import json

from clients.errors import (
    AuthError,
    BadRequest,
    Conflict,
    ModelNotFound,
    Overloaded,
    PayloadTooLarge,
    ServerError,
    UnsupportedMediaType,
    from_body,
    from_http,
)


def test_handler_error_body_over_http_keeps_reason_and_kind():
    body = json.dumps({"error": "text is empty", "kind": "empty_input"}).encode()
    err = from_http(400, body, "text is empty")
    assert isinstance(err, BadRequest)
    assert (err.status, err.reason, err.kind, err.protocol) == (
        400,
        "text is empty",
        "empty_input",
        "rest",
    )


def test_torchserve_invalid_key_is_an_auth_error_not_a_bad_request():
    body = json.dumps(
        {"code": 400, "type": "InvalidKeyException", "message": "Token Authorization failed."}
    ).encode()
    err = from_http(400, body)
    assert isinstance(err, AuthError) and err.kind == "InvalidKeyException"


def test_torchserve_status_codes_map_to_their_error_types():
    cases = {
        404: ModelNotFound,
        413: PayloadTooLarge,
        415: UnsupportedMediaType,
        503: Overloaded,
        500: ServerError,
    }
    for status, cls in cases.items():
        err = from_http(status, json.dumps({"code": status, "type": "X", "message": "m"}).encode())
        assert type(err) is cls and err.status == status and err.reason == "m"


def test_non_json_error_body_falls_back_to_the_text_then_the_status_line():
    assert from_http(502, b"gateway down").reason == "gateway down"
    assert from_http(502, b"", "Bad Gateway").reason == "Bad Gateway"


def test_ok_body_carrying_a_handler_error_becomes_the_same_error_as_over_rest():
    body = json.dumps({"error": "unsupported sample_rate 8000", "kind": "bad_field"}).encode()
    over_grpc, over_rest = from_body(body), from_http(400, body)
    assert type(over_grpc) is type(over_rest) is BadRequest
    assert (over_grpc.reason, over_grpc.kind) == (over_rest.reason, over_rest.kind)


def test_unsupported_media_type_kind_keeps_its_415_when_grpc_says_ok():
    err = from_body(json.dumps({"error": "not JSON", "kind": "unsupported_media_type"}).encode())
    assert isinstance(err, UnsupportedMediaType) and err.status == 415


def test_every_handler_error_kind_keeps_its_status_when_grpc_says_ok():
    from handlers.errors import KINDS, RequestError

    kinds = {kind: entry.status for kind, entry in KINDS.items()}
    assert kinds["stale_state"] == 409 and kinds["unsupported_media_type"] == 415
    for kind, status in kinds.items():
        err = from_body(json.dumps({"error": "x", "kind": kind}).encode())
        over_rest = from_http(status, json.dumps({"error": "x", "kind": kind}).encode())
        assert err.status == status and type(err) is type(over_rest), kind
    assert isinstance(from_body(b'{"error": "old", "kind": "stale_state"}'), Conflict)
    assert RequestError.kind in kinds


def test_normal_answers_are_not_mistaken_for_errors():
    for body in (
        b'{"label": "positive", "probabilities": {}}',
        b"[1, 2]",
        b"plain text",
        b'{"error": 3}',
    ):
        assert from_body(body) is None


def test_the_client_knows_every_server_kind_without_importing_the_handlers_budget():
    """Guard: `overloaded` lived in handlers/budget.py, which a client process never imports, so a
    gRPC answer marked overloaded in its body came back as a 400 BadRequest instead of a 503."""
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from clients.errors import from_body\n"
        "e = from_body(json.dumps({'error': 'busy', 'kind': 'overloaded'}).encode())\n"
        "assert 'torch' not in sys.modules and 'numpy' not in sys.modules, 'heavy import'\n"
        "print(type(e).__name__, e.status, e.error_class.__name__)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["Overloaded", "503", "Overloaded"]


def test_a_kind_takes_its_status_from_the_servers_taxonomy():
    from handlers.errors import error_kinds

    for kind, server in error_kinds().items():
        err = from_http(400, json.dumps({"error": "x", "kind": kind}).encode())
        assert err.status == server.status and err.error_class is server, kind


class _Rpc(Exception):
    """What grpc raises for a failed call: code, details, trailing metadata."""

    def __init__(self, code, details: str, trailing: tuple = ()):
        self._code, self._details, self._trailing = code, details, trailing

    def code(self):
        return self._code

    def details(self):
        return self._details

    def trailing_metadata(self):
        return self._trailing


def test_torchserves_grpc_errors_map_to_what_rest_answers():
    """Straight from TorchServe 0.12's gRPC API: INTERNAL with a Java class line."""
    import grpc

    from clients.grpc_client import _error_from_rpc

    internal = grpc.StatusCode.INTERNAL
    full = (
        'Model "frequency" has no worker to serve inference request. Please use scale workers '
        "API to add workers.\nInternalServerException.()"
    )
    cases = [
        (
            "Model not found: x\norg.pytorch.serve.archive.model.ModelNotFoundException",
            ModelNotFound,
        ),
        ("Parameter model_name is required.\nBadRequestException.()", BadRequest),
        (full, Overloaded),  # a full queue: the bench counts it as a refusal, not an error
        ("Worker died.\norg.pytorch.serve.http.InternalServerException", ServerError),
    ]
    for details, cls in cases:
        err = _error_from_rpc(_Rpc(internal, details))
        assert type(err) is cls, (details, err)
        assert "Exception" not in err.reason


def test_the_doors_grpc_errors_keep_their_kind():
    """Through the pod proxy: proper codes, no class lines, the kind in trailing metadata; its
    UNAVAILABLE is an answer (overloaded), not a connection that failed."""
    import grpc

    from clients.errors import ConnectionFailed
    from clients.grpc_client import _error_from_rpc

    kind = "error-kind"
    door = [
        (grpc.StatusCode.NOT_FOUND, "Model not found: x", "not_found", ModelNotFound),
        (
            grpc.StatusCode.INVALID_ARGUMENT,
            "Parameter model_name is required.",
            "bad_request",
            BadRequest,
        ),
        (grpc.StatusCode.UNAVAILABLE, "replica full, retry", "overloaded", Overloaded),
    ]
    for code, details, value, cls in door:
        err = _error_from_rpc(_Rpc(code, details, ((kind, value),)))
        assert type(err) is cls and err.reason == details, (details, err)
    lost = _error_from_rpc(_Rpc(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses"))
    assert isinstance(lost, ConnectionFailed)
