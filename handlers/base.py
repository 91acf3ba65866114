"""The TorchServe adapter over the shared lifecycle (handlers/service.py), owned whole.

TorchServe calls `handle(batch, context)` once per batch. This class maps each row and its headers
to a `Request`, runs `ModelService.handle_batch` and writes what the frontend needs through the
context: content types, response headers, each refused request's status and JSON reason, and
TorchServe's HandlerTime metric. It does not inherit TorchServe's own `BaseHandler.handle`, which
switches the *whole batch* to describe or explain mode from request 0's headers.

- Every response says how many requests ran together (`x-batch-size`) and its request id
  (`X-Request-ID`: the client's or the door's when acceptable, else TorchServe's), which its error
  body and its log lines carry too.
- Every response of a gRPC request says `ts_stream_next: false`: TorchServe 0.12's
  `StreamPredictions` reads that header without a null check and kills the worker without it. Over
  REST its mere presence turns the answer into a chunked stream, so REST rows never get it.

A model's handler file (handlers/<name>_handler.py, which the archive names) only says which
`Model` class it serves.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any, ClassVar

from handlers.codec import Reply
from handlers.errors import REQUEST_ID_HEADER, RequestError, mark_refused
from handlers.runtime import device_from_properties
from handlers.service import EXPLAIN_HEADER, ModelService, Request
from handlers.telemetry import Telemetry, request_id

log = logging.getLogger(__name__)

__all__ = ["BATCH_SIZE_HEADER", "EXPLAIN_HEADER", "STREAM_NEXT_HEADER", "ModelHandler"]

BATCH_SIZE_HEADER = "x-batch-size"
"""Response header: how many requests TorchServe ran together with this one (batching is visible)."""

STREAM_NEXT_HEADER = "ts_stream_next"
"""TorchServe's "more responses follow" flag. Over REST its mere presence turns the answer into a
chunked stream, so it is set only on gRPC requests (which carry no HTTP headers)."""


def handler_config(context: Any) -> dict:
    """The model-config.yaml `handler:` block (empty when the archive has none)."""
    return (getattr(context, "model_yaml_config", None) or {}).get("handler") or {}


def is_grpc(headers: dict) -> bool:
    """A gRPC request reaches the worker with its input names only (dict values: their content
    types); every REST request carries HTTP headers (and the frontend's own `explain`/`url_path`)."""
    return not any(isinstance(v, str | bytes) for v in headers.values())


class ModelHandler:
    model_class: ClassVar[Any]
    """The `Model` this handler serves (handlers/<name>/model.py)."""
    model: ClassVar[str] = "model"
    """The default model name (TorchServe's registered name wins)."""

    def initialize(self, context: Any) -> None:
        properties = context.system_properties
        name = context.model_name or self.model
        model = self.model_class.load(
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
        requests = [_request(context, i, row) for i, row in enumerate(data)]
        results = self.service.handle_batch(requests)
        batch = str(len(results))
        bodies = [
            self._write(context, i, result, request, batch)
            for i, (result, request) in enumerate(zip(results, requests, strict=True))
        ]
        _handler_time(context, start)
        return bodies

    @staticmethod
    def _write(
        context: Any, i: int, result: Reply | RequestError, request: Request, batch: str
    ) -> str | bytes:
        context.set_response_header(i, BATCH_SIZE_HEADER, batch)
        if request.id is not None:
            context.set_response_header(i, REQUEST_ID_HEADER, request.id)
        if is_grpc(dict(request.headers)):
            context.set_response_header(i, STREAM_NEXT_HEADER, "false")
        if isinstance(result, RequestError):
            return mark_refused(context, i, result, request.id)
        context.set_response_content_type(i, result.content_type)
        for name, value in result.headers.items():
            context.set_response_header(i, name, value)
        return result.body


def _request(context: Any, idx: int, row: Any) -> Request:
    """TorchServe's row `idx` → the runtime-neutral Request; its id is the client's (or the door's)
    X-Request-ID when acceptable, else TorchServe's (handlers/telemetry.request_id)."""
    headers = _headers(context, idx)
    return Request.from_row(row or {}, headers, request_id(context, idx, headers))


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
