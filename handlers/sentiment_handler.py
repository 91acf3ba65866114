"""TorchServe entry point for the sentiment model (the lifecycle is handlers/base.py).

inference runs every good text of the batch in one padded pass, within the batch's token budget;
each request gets its own JSON answer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from handlers.base import ModelHandler
from handlers.budget import within_budget
from handlers.codec import Reply, decode_request
from handlers.errors import RequestError
from handlers.sentiment.inputs import TextRequest, parse_texts
from handlers.sentiment.predict import UNCERTAINTY_SCORES, SentimentPredictor

log = logging.getLogger(__name__)

Answer = dict | list[dict]
"""One prediction, or a list of them for a {"texts": [...]} request."""


class SentimentHandler(ModelHandler):
    model = "sentiment"

    def load(self, model_dir: Path, config: dict, device: str, name: str) -> SentimentPredictor:
        predictor = SentimentPredictor.from_dir(model_dir, config, device=device, name=name)
        s = predictor.settings
        log.info(
            "sentiment %s ready: runtime=%s device=%s",
            s.version,
            s.runtime,
            predictor.runtime.device,
        )
        return predictor

    def parse(self, row: dict, headers: dict) -> TextRequest:
        payload = decode_request(row, headers)
        return parse_texts(payload, self.settings.max_text_bytes, self.settings.max_texts)

    def inference(self, parsed: list[TextRequest | RequestError]) -> list[Answer | RequestError]:
        # Each text is tokenized once: the ids both price the request against the batch's token
        # budget and become the runtime's input.
        encoder = self.predictor.encoder
        pieces = [
            encoder.pieces(item.texts) if isinstance(item, TextRequest) else [] for item in parsed
        ]
        parsed = self._within_budget(parsed, [encoder.token_count(p) for p in pieces])
        run = [
            (item, p)
            for item, p in zip(parsed, pieces, strict=True)
            if isinstance(item, TextRequest)
        ]
        texts = [t for item, _ in run for t in item.texts]
        results = iter(self.predictor.predict(texts, [x for _, p in run for x in p]))
        answers: list[Answer | RequestError] = []
        for item in parsed:
            if isinstance(item, RequestError):
                answers.append(item)
            else:
                mine = [next(results) for _ in item.texts]
                answers.append(mine if item.many else mine[0])
        return answers

    def _within_budget(
        self, parsed: list[TextRequest | RequestError], costs: list[int]
    ) -> list[TextRequest | RequestError]:
        """Requests past the batch's token budget become 503 `overloaded` (handlers/budget.py)."""
        return within_budget(
            parsed,
            [c if isinstance(i, TextRequest) else None for i, c in zip(parsed, costs, strict=True)],
            self.settings.max_batch_tokens,
            "tokens",
        )

    def reply(self, answer: Answer) -> Reply:
        return Reply(json.dumps(answer), "application/json", {})

    def report(self, answers: list[Answer]) -> None:
        predictions = [p for a in answers for p in (a if isinstance(a, list) else [a])]
        self.telemetry.predictions(p["label"] for p in predictions)
        self.telemetry.truncated(sum(bool(p["truncated"]) for p in predictions))
        for measure in UNCERTAINTY_SCORES:
            self.telemetry.uncertainty(measure, [p["uncertainty"][measure] for p in predictions])
