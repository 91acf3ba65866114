"""TorchServe entry point for the sentiment model: wires the lifecycle to plain modules.

preprocess decodes and validates each request on its own (a bad one becomes its error, never an
exception), inference runs every good text of the batch in one padded pass, postprocess gives each
request its own answer and marks bad ones with their status.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ts.torch_handler.base_handler import BaseHandler

from handlers.budget import admit, over_budget
from handlers.codec import decode_request
from handlers.errors import RequestError, mark_refused
from handlers.runtime import device_from_properties
from handlers.sentiment.inputs import TextRequest, parse_texts
from handlers.sentiment.predict import SentimentPredictor
from handlers.telemetry import Telemetry, timed

log = logging.getLogger(__name__)

BATCH_SIZE_HEADER = "x-batch-size"
"""Response header: how many requests TorchServe ran together with this one (batching is visible)."""


class SentimentHandler(BaseHandler):
    def initialize(self, context):
        properties = context.system_properties
        config = (getattr(context, "model_yaml_config", None) or {}).get("handler") or {}
        self.predictor = SentimentPredictor.from_dir(
            Path(properties["model_dir"]),
            config,
            device=device_from_properties(properties),
            name=context.model_name or "sentiment",
        )
        self.settings = self.predictor.settings
        self.telemetry = Telemetry.from_context(context)
        self.initialized = True
        log.info(
            "sentiment %s ready: runtime=%s device=%s",
            self.settings.version,
            self.settings.runtime,
            self.predictor.runtime.device,
        )

    @timed("preprocess")
    def preprocess(self, data: list[dict]) -> list[TextRequest | RequestError]:
        return [self._parse(i, row) for i, row in enumerate(data)]

    def _parse(self, i: int, row: dict) -> TextRequest | RequestError:
        try:
            payload = decode_request(row, self.context.get_all_request_header(i))
            return parse_texts(payload, self.settings.max_text_bytes, self.settings.max_texts)
        except RequestError as err:
            return err

    @timed("inference")
    def inference(
        self, parsed: list[TextRequest | RequestError]
    ) -> list[dict | list[dict] | RequestError]:
        parsed = self._within_budget(parsed)
        texts = [t for item in parsed if isinstance(item, TextRequest) for t in item.texts]
        results = iter(self.predictor.predict(texts))
        answers: list[dict | list[dict] | RequestError] = []
        for item in parsed:
            if isinstance(item, RequestError):
                answers.append(item)
            else:
                mine = [next(results) for _ in item.texts]
                answers.append(mine if item.many else mine[0])
        return answers

    def _within_budget(
        self, parsed: list[TextRequest | RequestError]
    ) -> list[TextRequest | RequestError]:
        budget = self.settings.max_batch_tokens
        costs = [
            self.predictor.encoder.token_count(item.texts)
            if isinstance(item, TextRequest)
            else None
            for item in parsed
        ]
        return [
            item if ok or not isinstance(item, TextRequest) else over_budget(budget)
            for item, ok in zip(parsed, admit(costs, budget), strict=True)
        ]

    @timed("postprocess")
    def postprocess(self, answers: list[dict | list[dict] | RequestError]) -> list[str]:
        self.telemetry.answers(answers, self.context)
        batch = str(len(answers))
        bodies = []
        for i, answer in enumerate(answers):
            self.context.set_response_content_type(i, "application/json")
            self.context.set_response_header(i, BATCH_SIZE_HEADER, batch)
            if isinstance(answer, RequestError):
                bodies.append(mark_refused(self.context, i, answer))
            else:
                bodies.append(json.dumps(answer))
        return bodies
