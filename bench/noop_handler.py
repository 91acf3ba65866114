"""A TorchServe handler with no model: every request gets a pre-built answer of the served model's
size (bench/ceiling.py builds the archive), so what it serves per second is the frontend's ceiling
for those request and answer sizes: the HTTP/gRPC door, the frontend, batching, the worker socket
and the reply, with nothing parsed and nothing computed.

The archive carries `answer.json` (the JSON answer), `answer.f32` (the float32 answer) and
`answer.headers.json` (the float32 answer's headers); a request whose Accept names
application/octet-stream gets the float32 one, any other the JSON one. The body is never read.
"""

from __future__ import annotations

import json
from pathlib import Path

FLOAT32 = "application/octet-stream"
_answers: dict = {}


def _load(model_dir: Path) -> None:
    _answers["json"] = (model_dir / "answer.json").read_bytes()
    _answers["f32"] = (model_dir / "answer.f32").read_bytes()
    _answers["headers"] = json.loads((model_dir / "answer.headers.json").read_text())


def _accepts_float32(context, i: int) -> bool:
    try:
        headers = context.get_all_request_header(i) or {}
    except Exception:  # a context without request processors
        return False
    return any(k.lower() == "accept" and FLOAT32 in str(v) for k, v in headers.items())


def handle(data, context):
    if not _answers:
        _load(Path(context.system_properties["model_dir"]))
    if data is None:  # TorchServe calls the handler once with no data at load
        return None
    out = []
    for i in range(len(data)):
        if _accepts_float32(context, i):
            context.set_response_content_type(i, FLOAT32)
            for name, value in _answers["headers"].items():
                context.set_response_header(i, name, value)
            out.append(_answers["f32"])
        else:
            context.set_response_content_type(i, "application/json")
            out.append(_answers["json"])
    return out
