"""The TorchServe lifecycle every model shares; a model's handler adds only what is its own.

preprocess decodes and validates each request on its own (a bad one becomes its `RequestError`,
never an exception), inference is the model's, postprocess writes each answer through the model's
`reply`, marks refused requests with their status and reports the batch to telemetry.
A model handler implements `load`, `parse`, `inference`, `reply` and `report`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ts.torch_handler.base_handler import BaseHandler

from handlers.codec import Reply
from handlers.errors import RequestError, mark_refused
from handlers.runtime import device_from_properties
from handlers.telemetry import Telemetry, request_id, timed

BATCH_SIZE_HEADER = "x-batch-size"
"""Response header: how many requests TorchServe ran together with this one (batching is visible)."""


def handler_config(context: Any) -> dict:
    """The model-config.yaml `handler:` block (empty when the archive has none)."""
    return (getattr(context, "model_yaml_config", None) or {}).get("handler") or {}


class ModelHandler(BaseHandler):
    model: str = "model"
    """The default model name (TorchServe's registered name wins)."""

    def initialize(self, context):
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

    def reply(self, answer: Any) -> Reply:
        raise NotImplementedError

    def report(self, answers: list[Any]) -> None:
        """Model-specific telemetry of the batch's answered (not refused) requests."""

    # The shared lifecycle.
    @timed("preprocess")
    def preprocess(self, data: list[dict]) -> list[Any]:
        return [self._parse(i, row) for i, row in enumerate(data)]

    def _parse(self, i: int, row: dict) -> Any:
        try:
            return self.parse(row, self.context.get_all_request_header(i))
        except RequestError as err:
            return err

    @timed("postprocess")
    def postprocess(self, answers: list[Any]) -> list[str | bytes]:
        self.telemetry.batch(len(answers))
        batch = str(len(answers))
        bodies: list[str | bytes] = []
        for i, answer in enumerate(answers):
            self.context.set_response_header(i, BATCH_SIZE_HEADER, batch)
            if isinstance(answer, RequestError):
                self.telemetry.refused_error(answer, request_id(self.context, i))
                bodies.append(mark_refused(self.context, i, answer))
                continue
            reply = self.reply(answer)
            self.context.set_response_content_type(i, reply.content_type)
            for name, value in reply.headers.items():
                self.context.set_response_header(i, name, value)
            bodies.append(reply.body)
        self.report([a for a in answers if not isinstance(a, RequestError)])
        return bodies
