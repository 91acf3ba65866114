"""TorchServe entry point for the frequency-extraction LSTM: wires the lifecycle to plain modules.

preprocess decodes and validates each request on its own (a bad one becomes its error, never an
exception), inference hands the batch to the predictor (one-shot windows and stream chunks, each
chunk continuing the state its client sent: the worker keeps nothing), postprocess writes each
answer (JSON or float32) and marks bad ones with their status.
"""

from __future__ import annotations

import logging
from pathlib import Path

from ts.torch_handler.base_handler import BaseHandler

from handlers.errors import RequestError, mark_refused
from handlers.frequency.codec import SignalRequest, decode_request
from handlers.frequency.predict import Extraction, FrequencyPredictor
from handlers.runtime import device_from_properties
from handlers.telemetry import Telemetry, timed

log = logging.getLogger(__name__)

BATCH_SIZE_HEADER = "x-batch-size"
"""Response header: how many requests TorchServe ran together with this one (batching is visible)."""


class FrequencyHandler(BaseHandler):
    def initialize(self, context):
        properties = context.system_properties
        config = (getattr(context, "model_yaml_config", None) or {}).get("handler") or {}
        self.predictor = FrequencyPredictor.from_dir(
            Path(properties["model_dir"]),
            config,
            device=device_from_properties(properties),
            name=context.model_name or "frequency",
        )
        self.settings = self.predictor.settings
        self.telemetry = Telemetry.from_context(context)
        self.initialized = True
        log.info(
            "frequency %s ready: runtime=%s", self.predictor.model["version"], self.settings.runtime
        )

    @timed("preprocess")
    def preprocess(self, data: list[dict]) -> list[SignalRequest | RequestError]:
        return [self._parse(i, row) for i, row in enumerate(data)]

    def _parse(self, i: int, row: dict) -> SignalRequest | RequestError:
        try:
            return decode_request(row, self.context.get_all_request_header(i), self.settings)
        except RequestError as err:
            return err

    @timed("inference")
    def inference(self, items: list[SignalRequest | RequestError]) -> list:
        return self.predictor.predict(items)

    @timed("postprocess")
    def postprocess(self, answers: list[Extraction | RequestError]) -> list[str | bytes]:
        self.telemetry.answers(answers, self.context)  # batch size and refusals
        batch = str(len(answers))
        bodies: list[str | bytes] = []
        for i, answer in enumerate(answers):
            self.context.set_response_header(i, BATCH_SIZE_HEADER, batch)
            if isinstance(answer, RequestError):
                bodies.append(mark_refused(self.context, i, answer))
                continue
            self.telemetry.extractions(answer.frequencies, answer.components.std)
            if answer.windows:
                self.telemetry.windows([answer.windows])
            reply = self.predictor.reply(answer)
            self.context.set_response_content_type(i, reply.content_type)
            for name, value in reply.headers.items():
                self.context.set_response_header(i, name, value)
            bodies.append(reply.body)
        return bodies
