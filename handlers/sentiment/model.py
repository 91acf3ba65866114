"""The sentiment model's part of the lifecycle (handlers/service.py): parse texts, run every good
text of the batch in one padded pass within the batch's token budget, answer each request with
its typed `Classification` (encoded in handlers/sentiment/codec.py, the model's JSON contract)."""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from handlers.budget import within_budget
from handlers.codec import Reply, decode_request
from handlers.errors import RequestError
from handlers.explain import Explanations, bounded
from handlers.sentiment.codec import Classification
from handlers.sentiment.inputs import TextRequest, parse_texts
from handlers.sentiment.predict import UNCERTAINTY_SCORES, SentimentPredictor
from handlers.sentiment.settings import SentimentSettings
from handlers.service import Request
from handlers.telemetry import Telemetry

log = logging.getLogger(__name__)


class SentimentModel:
    reads_parts: ClassVar[bool] = False

    def __init__(self, predictor: SentimentPredictor):
        self.predictor = predictor
        self.name = predictor.name
        self.settings: SentimentSettings = predictor.settings

    @cached_property
    def explainer(self) -> Any:
        """Built on the first explanation: Captum and torch load only then."""
        from handlers.sentiment.explain import SentimentExplainer

        s = self.settings
        return SentimentExplainer(
            self.predictor, s.explain_method, samples=s.explain_samples, passes=s.explain_passes
        )

    @classmethod
    def load(
        cls, model_dir: Path, config: dict, device: str = "cpu", name: str = "sentiment"
    ) -> SentimentModel:
        predictor = SentimentPredictor.from_dir(model_dir, config, device=device, name=name)
        s = predictor.settings
        log.info(
            "sentiment %s ready: runtime=%s (%s: %s) device=%s",
            s.version,
            predictor.runtime_kind,
            s.runtime,
            predictor.runtime_reason,
            predictor.runtime.device,
        )
        return cls(predictor)

    def parse(self, request: Request) -> TextRequest:
        payload = decode_request(request)
        return parse_texts(payload, self.settings.max_text_bytes, self.settings.max_texts)

    def inference(
        self, parsed: list[TextRequest | RequestError]
    ) -> list[Classification | RequestError]:
        # Each text is tokenized once: the ids both price the request against the batch's token
        # budget and become the runtime's input.
        encoder = self.predictor.encoder
        pieces = [
            encoder.pieces(item.texts) if isinstance(item, TextRequest) else [] for item in parsed
        ]
        costs = [
            encoder.token_count(p) if isinstance(item, TextRequest) else None
            for item, p in zip(parsed, pieces, strict=True)
        ]
        # Requests past the batch's token budget become 503 `overloaded` (handlers/budget.py).
        parsed = within_budget(parsed, costs, self.settings.max_batch_tokens, "tokens")
        run = [
            (item, p)
            for item, p in zip(parsed, pieces, strict=True)
            if isinstance(item, TextRequest)
        ]
        texts = [t for item, _ in run for t in item.texts]
        results = iter(self.predictor.predict(texts, [x for _, p in run for x in p]))
        answers: list[Classification | RequestError] = []
        for item in parsed:
            if isinstance(item, RequestError):
                answers.append(item)
            else:
                mine = tuple(next(results) for _ in item.texts)
                answers.append(Classification(mine, item.many))
        return answers

    def reply(self, answer: Classification) -> Reply:
        return answer.reply()

    def explain_cost(self, request: TextRequest) -> int:
        """Token-passes: per text, the passes its explanation takes x the tokens of each pass."""
        encoder = self.predictor.encoder
        return sum(
            self.explainer.cost(text) * encoder.token_count([p])
            for text, p in zip(request.texts, encoder.pieces(request.texts), strict=True)
        )

    def explain(
        self, parsed: list[TextRequest | RequestError]
    ) -> list[Explanations | RequestError]:
        """Word attributions of each request's texts (handlers/sentiment/explain.py), within the
        per-request and per-batch explanation budgets (handlers/explain.py)."""
        s = self.settings
        costs = [self.explain_cost(r) if isinstance(r, TextRequest) else None for r in parsed]
        admitted = bounded(
            parsed, costs, s.max_explain_tokens, s.max_batch_explain_tokens, "token-passes"
        )
        return [
            Explanations(tuple(self.explainer.explain(t) for t in r.texts), r.many)
            if isinstance(r, TextRequest)
            else r
            for r in admitted
        ]

    def report(self, answers: list[Classification], telemetry: Telemetry) -> None:
        predictions = [p for a in answers for p in a.predictions]
        telemetry.predictions(p["label"] for p in predictions)
        telemetry.truncated(sum(bool(p["truncated"]) for p in predictions))
        for measure in UNCERTAINTY_SCORES:
            telemetry.uncertainty(measure, [p["uncertainty"][measure] for p in predictions])


MODEL = SentimentModel
"""This model's entry in the registry (handlers/registry.py)."""
