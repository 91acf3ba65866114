"""The TorchServe lifecycle every model shares, owned whole: a model's handler adds only its own parts.

TorchServe calls `handle(batch, context)` once per batch. Nothing it decides for the batch comes from
one client's request: TorchServe's own `BaseHandler.handle` switches the *whole batch* to describe or
explain mode from request 0's headers, so this class does not inherit it. Instead, per request:

- parse: decode and validate (a bad request becomes its `RequestError`); a request for a mode this
  deployment does not serve (`/explanations`, KServe `:explain`) is refused alone with 501; any
  other exception becomes that request's own 500 with its request id, logged with the traceback;
- inference: the model's batched call over the parsed requests. If it raises, the batch is run again
  one request at a time, so only the request that fails alone gets a 500 and its neighbours get the
  answers they get alone;
- reply: each answer is written by the model's `reply`; a request marked refused gets its status and
  JSON reason. Every response of a gRPC request says `ts_stream_next: false`: TorchServe 0.12's
  `StreamPredictions` reads that header without a null check and kills the worker without it.

A model handler implements `load`, `parse`, `inference`, `reply` and `report`.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from handlers.codec import Reply, request_header
from handlers.errors import InternalError, NotServed, RequestError, mark_refused
from handlers.runtime import device_from_properties
from handlers.telemetry import Telemetry, request_id

log = logging.getLogger(__name__)

BATCH_SIZE_HEADER = "x-batch-size"
"""Response header: how many requests TorchServe ran together with this one (batching is visible)."""

STREAM_NEXT_HEADER = "ts_stream_next"
"""TorchServe's "more responses follow" flag. Over REST its mere presence turns the answer into a
chunked stream, so it is set only on gRPC requests (which carry no HTTP headers)."""

EXPLAIN_HEADER = "explain"
"""Set by TorchServe's frontend to "True" on /explanations, /v1/models/<m>:explain and
/v2/models/<m>/explain."""


def handler_config(context: Any) -> dict:
    """The model-config.yaml `handler:` block (empty when the archive has none)."""
    return (getattr(context, "model_yaml_config", None) or {}).get("handler") or {}


def is_grpc(headers: dict) -> bool:
    """A gRPC request reaches the worker with its input names only (dict values: their content
    types); every REST request carries HTTP headers (and the frontend's own `explain`/`url_path`)."""
    return not any(isinstance(v, str | bytes) for v in headers.values())


class ModelHandler:
    model: str = "model"
    """The default model name (TorchServe's registered name wins)."""

    def initialize(self, context: Any) -> None:
        properties = context.system_properties
        self.predictor = self.load(
            Path(properties["model_dir"]),
            handler_config(context),
            device_from_properties(properties),
            context.model_name or self.model,
        )
        self.settings = self.predictor.settings
        self.telemetry = Telemetry.from_context(context)
        self.initialized = True

    # What a model provides.
    def load(self, model_dir: Path, config: dict, device: str, name: str) -> Any:
        """The model's predictor, from the unpacked archive and the `handler:` block."""
        raise NotImplementedError

    def parse(self, row: dict, headers: dict) -> Any:
        """One request row → the model's request, or raise a RequestError."""
        raise NotImplementedError

    def inference(self, parsed: list[Any]) -> list[Any]:
        """The batch's parsed requests (RequestErrors among them) → one answer or error each."""
        raise NotImplementedError

    def reply(self, answer: Any) -> Reply:
        raise NotImplementedError

    def report(self, answers: list[Any]) -> None:
        """Model-specific telemetry of the batch's answered (not refused) requests."""

    # The lifecycle, owned whole.
    def handle(self, data: list[dict], context: Any) -> list[str | bytes]:
        start = time.perf_counter()
        ids = [request_id(context, i) for i in range(len(data))]
        headers = [_headers(context, i) for i in range(len(data))]
        with self.telemetry.stage("preprocess"):
            parsed = [
                self._parse(row, h, rid) for row, h, rid in zip(data, headers, ids, strict=True)
            ]
        with self.telemetry.stage("inference"):
            answers = self._infer(parsed, ids)
        with self.telemetry.stage("postprocess"):
            bodies = self._respond(context, answers, headers, ids)
        _handler_time(context, start)
        return bodies

    def _parse(self, row: Any, headers: dict, rid: str | None) -> Any:
        try:
            if str(request_header(headers, EXPLAIN_HEADER)).lower() == "true":
                raise NotServed(
                    "explanations are not served by this deployment; POST the same body to "
                    f"/predictions/{self.model}"
                )
            return self.parse(row, headers)
        except RequestError as err:
            return err
        except Exception:
            log.exception("request %s: parsing failed", rid)
            return InternalError(rid)

    def _infer(self, parsed: list[Any], ids: list[str | None]) -> list[Any]:
        try:
            return self._checked(self.inference(parsed), parsed)
        except Exception:
            log.exception(
                "batch of %d: the model call failed; running its requests alone", len(parsed)
            )
        # One request's input may break the batched call: each runs alone, so only its own answer
        # is an error (a lone request's answer is the same as its answer in a batch).
        answers: list[Any] = []
        for item, rid in zip(parsed, ids, strict=True):
            if isinstance(item, RequestError):
                answers.append(item)
                continue
            try:
                [answer] = self._checked(self.inference([item]), [item])
            except Exception:
                log.exception("request %s: the model call failed", rid)
                answer = InternalError(rid)
            answers.append(answer)
        return answers

    @staticmethod
    def _checked(answers: Any, parsed: list[Any]) -> list[Any]:
        if not isinstance(answers, list) or len(answers) != len(parsed):
            raise TypeError(
                f"inference returned {type(answers).__name__}, not {len(parsed)} answers"
            )
        return answers

    def _respond(
        self, context: Any, answers: list[Any], headers: list[dict], ids: list[str | None]
    ) -> list[str | bytes]:
        self.telemetry.batch(len(answers))
        batch = str(len(answers))
        bodies: list[str | bytes] = []
        answered = []
        for i, (answer, rid) in enumerate(zip(answers, ids, strict=True)):
            context.set_response_header(i, BATCH_SIZE_HEADER, batch)
            if is_grpc(headers[i]):
                context.set_response_header(i, STREAM_NEXT_HEADER, "false")
            if not isinstance(answer, RequestError):
                try:
                    reply = self.reply(answer)
                    context.set_response_content_type(i, reply.content_type)
                    for name, value in reply.headers.items():
                        context.set_response_header(i, name, value)
                    bodies.append(reply.body)
                    answered.append(answer)
                    continue
                except Exception:
                    log.exception("request %s: writing the answer failed", rid)
                    answer = InternalError(rid)
            self.telemetry.refused_error(answer, rid)
            bodies.append(mark_refused(context, i, answer))
        try:
            self.report(answered)
        except Exception:  # why: telemetry never turns answered requests into errors
            log.warning("telemetry: report failed", exc_info=True)
        return bodies


def _headers(context: Any, idx: int) -> dict:
    try:
        headers = context.get_all_request_header(idx)
    except Exception:  # a context without request processors (in-process callers)
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
