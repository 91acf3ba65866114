"""A tiny TorchServe handler that follows the project's request contract without a model.

It lets the reliability harness be exercised before (or without) the real archives: JSON
`{"text": str}` in, `{"label", "chars"}` out, and a 400 with `{"error": reason}` for anything else,
marked per request so a bad request never fails its batch neighbours.
"""

from __future__ import annotations

import json
from http import HTTPStatus

MAX_CHARS = 10_000


def _answer(body: object) -> tuple[int, dict]:
    if isinstance(body, dict) and "body" in body:
        body = body["body"]
    elif isinstance(body, dict) and "data" in body:
        body = body["data"]
    if isinstance(body, bytes | bytearray):
        try:
            body = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            return 400, {"error": "body is not UTF-8 JSON"}
    if not isinstance(body, dict) or not isinstance(body.get("text"), str):
        return 400, {"error": "expected a JSON object with a string field 'text'"}
    text = body["text"]
    if not text.strip():
        return 400, {"error": "text is empty"}
    if len(text) > MAX_CHARS:
        return 400, {"error": f"text longer than {MAX_CHARS} characters"}
    return 200, {"label": "long" if len(text) > 20 else "short", "chars": len(text)}


def handle(data, context):
    if data is None:  # TorchServe calls the handler once with no data at load
        return None
    out = []
    for i, request in enumerate(data):
        status, body = _answer(request)
        if status != 200:
            context.set_response_status(status, HTTPStatus(status).phrase, idx=i)
        out.append(json.dumps(body))
    return out
