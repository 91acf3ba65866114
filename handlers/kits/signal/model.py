"""The signal kit's part of the lifecycle (handlers/service.py), which a signal model takes whole:
decode signal requests (JSON or raw float32), price them before any work (the cost model:
samples x frequencies per batch; sample-passes per explanation and per batch), run the batch's
one-shot windows and stream chunks (each chunk continuing the state its client sent: the worker
keeps nothing), answer with typed `Extraction`s, explain with block attributions.

A model of the kit is a subclass naming its predictor (handlers/frequency/model.py)."""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

from handlers.budget import Budget
from handlers.codec import Reply
from handlers.errors import BadField, RequestError
from handlers.kits.signal.codec import SignalRequest, decode_request
from handlers.kits.signal.predict import Extraction, SignalPredictor
from handlers.kits.signal.settings import SignalSettings
from handlers.predictor import PredictorModel
from handlers.service import Request
from handlers.telemetry import Telemetry


class SignalModel(PredictorModel[SignalPredictor]):
    """`load(..., state_key=...)` signs stream states with that key; without it the predictor
    reads the deployment's key file."""

    reads_parts: ClassVar[bool] = True
    settings: SignalSettings

    def parse(self, request: Request) -> SignalRequest:
        return decode_request(request, self.settings)

    @staticmethod
    def cost(r: SignalRequest) -> int:
        return int(r.signal.shape[0] * len(r.selectors))

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """Work per batch, like sentiment's tokens: samples x frequencies, in arrival order."""
        return (Budget(self.settings.max_batch_samples, "samples x frequencies", self.cost),)

    def inference(
        self, parsed: list[SignalRequest | RequestError]
    ) -> list[Extraction | RequestError]:
        return self.predictor.predict(parsed)

    def reply(self, answer: Extraction) -> Reply:
        return answer.reply()

    @cached_property
    def explainer(self) -> Any:
        """Built on the first explanation: Captum and torch load only then."""
        from handlers.kits.signal.explain import BlockExplainer

        return BlockExplainer(self.predictor, block=self.settings.explain_block)

    def explain_cost(self, r: SignalRequest) -> int:
        """Sample-passes; a stream chunk is refused (400) before it costs anything."""
        if r.streaming:
            raise BadField(
                "explanations take a whole signal, not a stream chunk (drop stream/state)"
            )
        return int(self.explainer.cost(r) * r.signal.shape[0])

    @property
    def explain_budgets(self) -> tuple[Budget, ...]:
        s = self.settings
        limit = s.max_explain_samples
        return (Budget(s.max_batch_explain_samples, "sample-passes", self.explain_cost, limit),)

    def explain(self, parsed: list[SignalRequest | RequestError]) -> list[Any]:
        """Per requested frequency, each input sample's attribution (handlers/kits/signal/explain.py),
        admitted by the per-request and per-batch explanation budgets (`explain_budgets`)."""
        return [self.explainer.explain(r) if isinstance(r, SignalRequest) else r for r in parsed]

    def report(self, answers: list[Extraction], telemetry: Telemetry) -> None:
        telemetry.extractions((a.frequencies, a.components.std) for a in answers)
        telemetry.windows(a.windows for a in answers if a.windows)
