"""The TorchServe adapter over the shared lifecycle (handlers/service.py), owned whole.

TorchServe calls `handle(batch, context)` once per batch. This class maps each row and its headers
to a runtime-neutral `Request` (`request_from_row`: the one place that knows TorchServe's row), runs `ModelService.handle_batch` and writes what the frontend needs through the
context: content types, response headers, each refused request's status and JSON reason, and
TorchServe's HandlerTime metric. It does not inherit TorchServe's own `BaseHandler.handle`, which
switches the *whole batch* to describe or explain mode from request 0's headers.

- Every response says how many requests ran together (`x-batch-size`) and its request id
  (`X-Request-ID`: the client's or the door's when acceptable, else TorchServe's), which its error
  body and its log lines carry too.
- Every response of a gRPC request says `ts_stream_next: false`: TorchServe 0.12's
  `StreamPredictions` reads that header without a null check and kills the worker without it. Over
  REST its mere presence turns the answer into a chunked stream, so REST rows never get it.

A model's handler file (handlers/<name>_handler.py, which the archive names) only names its
model's spec (`SPEC`, handlers/<name>/__init__.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from handlers.codec import Reply, media_type, request_content_type, request_header
from handlers.errors import REQUEST_ID_HEADER, RequestError, mark_refused
from handlers.runtime import device_from_properties
from handlers.service import ModelService, Request
from handlers.spec import ModelSpec
from handlers.telemetry import Telemetry, request_id

log = logging.getLogger(__name__)

__all__ = ["BATCH_SIZE_HEADER", "STREAM_NEXT_HEADER", "ModelHandler"]

BATCH_SIZE_HEADER = "x-batch-size"
"""Response header: how many requests TorchServe ran together with this one (batching is visible)."""

STREAM_NEXT_HEADER = "ts_stream_next"
"""TorchServe's "more responses follow" flag. Over REST its mere presence turns the answer into a
chunked stream, so it is set only on gRPC requests (which carry no HTTP headers)."""


BODY_KEYS = ("body", "data")
"""REST puts a raw body under "body"; gRPC clients (and form posts) conventionally use "data"."""


def request_from_row(
    row: Mapping[str, Any],
    headers: Mapping[str, Any],
    id: str | None = None,
    reads_parts: bool = False,
) -> Request:
    """One TorchServe request row and its headers → a `Request`.

    The row maps parameter names to values: the body under "body" or "data", gRPC inputs and form
    fields beside it; a lone parameter of another name is the body, unless the model reads named
    parts (`reads_parts`: then it is a part, and the request has no body). TorchServe keeps each
    parameter's content type under its name in the headers ({"body": {"content-type": ...}}) and
    the HTTP headers at the top level; the body's own type wins (a multipart request's top-level
    type describes the envelope). gRPC requests carry no HTTP headers at all."""
    key = next((k for k in BODY_KEYS if row.get(k) is not None), None)
    if key is None and len(row) == 1 and not reads_parts:
        key = next(iter(row))
    http = {
        k: v.decode("latin-1") if isinstance(v, bytes) else v
        for k, v in headers.items()
        if isinstance(k, str) and isinstance(v, str | bytes)
    }
    own = headers.get(key) if key is not None else None
    if isinstance(own, dict) and own.get("content-type"):
        kind: str | None = media_type(_as_text(own["content-type"]))
    else:
        top = request_content_type(http)
        kind = "" if top.startswith("multipart/") else top
    return Request(
        row[key] if key is not None else None,
        http,
        id,
        {k: v for k, v in row.items() if k != key},
        kind,
    )


def _as_text(value: Any) -> str:
    """A header value as the client sent it (handlers/codec.request_header's rule)."""
    return request_header({"v": value if isinstance(value, bytes) else str(value)}, "v") or ""


def handler_config(context: Any) -> dict:
    """The model-config.yaml `handler:` block (empty when the archive has none)."""
    return (getattr(context, "model_yaml_config", None) or {}).get("handler") or {}


def is_grpc(headers: Mapping[str, Any]) -> bool:
    """A gRPC request reaches the worker with its input names only (dict values: their content
    types); every REST request carries HTTP headers (and the frontend's own `explain`/`url_path`)."""
    return not any(isinstance(v, str | bytes) for v in headers.values())


class ModelHandler:
    spec: ClassVar[ModelSpec]
    """The model this handler serves: its `Model` class, and its name by default (TorchServe's
    registered name wins)."""

    def initialize(self, context: Any) -> None:
        properties = context.system_properties
        name = context.model_name or self.spec.name
        model = self.spec.model.load(
            Path(properties["model_dir"]),
            handler_config(context),
            device_from_properties(properties),
            name,
        )
        self.service = ModelService(model, Telemetry(getattr(context, "metrics", None), name))
        self.initialized = True

    @property
    def settings(self) -> Any:
        return self.service.model.settings

    def handle(self, data: list[dict], context: Any) -> list[str | bytes]:
        start = time.perf_counter()
        reads_parts = self.service.model.reads_parts
        headers = [_headers(context, i) for i in range(len(data))]
        requests = [
            request_from_row(row or {}, headers[i], request_id(context, i, headers[i]), reads_parts)
            for i, row in enumerate(data)
        ]
        results = self.service.handle_batch(requests)
        batch = str(len(results))
        bodies = [
            self._write(context, i, result, requests[i].id, is_grpc(headers[i]), batch)
            for i, result in enumerate(results)
        ]
        _handler_time(context, start)
        return bodies

    @staticmethod
    def _write(
        context: Any,
        i: int,
        result: Reply | RequestError,
        rid: str | None,
        grpc: bool,
        batch: str,
    ) -> str | bytes:
        context.set_response_header(i, BATCH_SIZE_HEADER, batch)
        if rid is not None:
            context.set_response_header(i, REQUEST_ID_HEADER, rid)
        if grpc:
            context.set_response_header(i, STREAM_NEXT_HEADER, "false")
        if isinstance(result, RequestError):
            return mark_refused(context, i, result, rid)
        context.set_response_content_type(i, result.content_type)
        for name, value in result.headers.items():
            context.set_response_header(i, name, value)
        return result.body


def _headers(context: Any, idx: int) -> dict:
    try:
        headers = context.get_all_request_header(idx)
    except Exception:  # a context without request processors
        return {}
    return headers if isinstance(headers, dict) else {}


def _handler_time(context: Any, start: float) -> None:
    """TorchServe's own HandlerTime metric, as BaseHandler.handle reported it."""
    metrics = getattr(context, "metrics", None)
    if metrics is None:
        return
    try:
        metrics.add_time("HandlerTime", round((time.perf_counter() - start) * 1000, 2), None, "ms")
    except Exception:
        log.warning("could not report HandlerTime", exc_info=True)
