"""The text kit's part of the lifecycle (handlers/service.py), which a text classifier takes whole:
parse and check texts (inputs.py), tokenize each once, price the request before any work (its cost
model: tokens per batch, token-passes per explanation), run every admitted text of the batch in
one runtime pass (classifier.py), answer each request with its typed `Classification` (codec.py),
explain with word or group attributions (explain.py).

A model of the kit is a subclass naming its predictor (handlers/sentiment/model.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import Any

from handlers import uncertainty
from handlers.budget import Budget
from handlers.codec import Reply, decode_request
from handlers.errors import RequestError
from handlers.explain import Explanations
from handlers.kits.text.classifier import TextPredictor
from handlers.kits.text.codec import Classification
from handlers.kits.text.inputs import TextRequest, parse_texts
from handlers.kits.text.settings import TextSettings
from handlers.predictor import PredictorModel
from handlers.service import Request
from handlers.telemetry import Telemetry


class TextModel(PredictorModel[TextPredictor]):
    settings: TextSettings

    @cached_property
    def explainer(self) -> Any:
        """Built on the first explanation: Captum and torch load only then."""
        from handlers.kits.text.explain import TextExplainer

        s = self.settings
        return TextExplainer(
            self.predictor, s.explain_method, samples=s.explain_samples, passes=s.explain_passes
        )

    @staticmethod
    def describe(predictor: TextPredictor) -> str:
        p = predictor
        return (
            f"runtime={p.runtime_kind} ({p.settings.runtime}: {p.runtime_reason}) "
            f"device={p.runtime.device}"
        )

    def parse(self, request: Request) -> TextRequest:
        """Texts checked against the limits and tokenized once: the ids both price the request
        against the batch's token budget and become the runtime's input. A typed request (read
        from tensors) is checked as its JSON body would be; a body is decoded once."""
        s = self.settings
        if isinstance(request.typed, TextRequest):
            texts = request.typed.checked(s.max_text_bytes, s.max_texts)
        else:
            texts = parse_texts(decode_request(request), s.max_text_bytes, s.max_texts)
        return replace(texts, pieces=tuple(self.predictor.encoder.pieces(texts.texts)))

    def pieces(self, request: TextRequest) -> Sequence[list[int]]:
        """The request's token ids: from its parse, or tokenized now (a TextRequest built
        elsewhere)."""
        return request.pieces or self.predictor.encoder.pieces(request.texts)

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """Tokens per batch: past it 503 `overloaded` (handlers/budget.py)."""
        count = self.predictor.encoder.token_count
        return (Budget(self.settings.max_batch_tokens, "tokens", lambda r: count(self.pieces(r))),)

    def inference(
        self, parsed: list[TextRequest | RequestError]
    ) -> list[Classification | RequestError]:
        run = [item for item in parsed if isinstance(item, TextRequest)]
        texts = [t for item in run for t in item.texts]
        results = iter(self.predictor.predict(texts, [p for r in run for p in self.pieces(r)]))
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
            for text, p in zip(request.texts, self.pieces(request), strict=True)
        )

    @property
    def explain_budgets(self) -> tuple[Budget, ...]:
        """Token-passes per request (past it 400 too_large) and per batch (503)."""
        s = self.settings
        return (
            Budget(
                s.max_batch_explain_tokens, "token-passes", self.explain_cost, s.max_explain_tokens
            ),
        )

    def explain(
        self, parsed: list[TextRequest | RequestError]
    ) -> list[Explanations | RequestError]:
        """Word attributions of each request's texts (explain.py), admitted by
        the per-request and per-batch explanation budgets (`explain_budgets`)."""
        return [
            Explanations(tuple(self.explainer.explain(t) for t in r.texts), r.many)
            if isinstance(r, TextRequest)
            else r
            for r in parsed
        ]

    def report(self, answers: list[Classification], telemetry: Telemetry) -> None:
        predictions = [p for a in answers for p in a.predictions]
        telemetry.predictions(p["label"] for p in predictions)
        telemetry.truncated(sum(bool(p["truncated"]) for p in predictions))
        for measure in uncertainty.SCORES:
            telemetry.uncertainty(measure, [p["uncertainty"][measure] for p in predictions])
