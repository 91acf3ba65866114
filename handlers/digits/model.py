"""The digits model's part of the lifecycle (handlers/service.py): decode images, classify the
batch's images in one runtime call within its image budget, answer with typed `DigitsAnswer`s.

Nothing here names the network: a different architecture exported with the same manifest block
serves through it unchanged (handlers/digits/predict.py reads the graph's shape and layout).
"""

from __future__ import annotations

import logging
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from handlers.budget import Budget
from handlers.codec import Reply
from handlers.digits.codec import ImageRequest, PendingImages
from handlers.digits.predict import DigitsAnswer, DigitsPredictor
from handlers.digits.settings import DigitsSettings
from handlers.errors import RequestError
from handlers.explain import Explanations
from handlers.service import Request
from handlers.telemetry import Telemetry

log = logging.getLogger(__name__)


class DigitsModel:
    reads_parts: ClassVar[bool] = False

    def __init__(self, predictor: DigitsPredictor):
        self.predictor = predictor
        self.name = predictor.name
        self.settings: DigitsSettings = predictor.settings

    @classmethod
    def load(
        cls, model_dir: Path, config: dict, device: str = "cpu", name: str = "digits"
    ) -> DigitsModel:
        predictor = DigitsPredictor.from_dir(model_dir, config, device=device, name=name)
        s = predictor.settings
        log.info(
            "digits %s ready: arch=%s input=%s %s runtime=%s",
            s.version, s.export.arch, list(s.export.input_shape), s.export.layout, s.runtime,
        )  # fmt: skip
        return cls(predictor)

    def parse(self, request: Request) -> PendingImages:
        """Read and priced from the image headers only: decoding waits until the batch's budgets
        have admitted the request (DigitsPredictor.predict, `explain`)."""
        return self.predictor.read(request)

    @property
    def budgets(self) -> tuple[Budget, ...]:
        """Images per batch, then the decoding guard (bytes the batch's images decode into, from
        their headers): past either 503 + Retry-After before anything is decoded."""
        s = self.settings
        return (
            Budget(s.max_batch_images, "images", lambda r: len(r.images)),
            self.decoding_guard,
        )

    @property
    def decoding_guard(self) -> Budget:
        return Budget(
            self.settings.max_batch_decoded_bytes,
            "bytes of decoded images",
            lambda r: r.decoded_bytes if isinstance(r, PendingImages) else None,
        )

    def inference(
        self, parsed: list[PendingImages | RequestError]
    ) -> list[DigitsAnswer | RequestError]:
        return self.predictor.predict(parsed)

    def reply(self, answer: DigitsAnswer) -> Reply:
        return self.predictor.reply(answer)

    @cached_property
    def explainer(self) -> Any:
        """Built on the first explanation: Captum and torch load only then."""
        from handlers.digits.explain import DigitsExplainer

        s = self.settings
        return DigitsExplainer(self.predictor, s.explain_method, s.explain_samples)

    @property
    def explain_budgets(self) -> tuple[Budget, ...]:
        """Image-passes per request (400 past it) and per batch (503), then the decoding guard:
        all priced before an image is decoded."""
        s = self.settings
        passes = Budget(
            s.max_batch_explain_passes,
            "image-passes",
            lambda r: len(r.images) * self.explainer.cost(),
            s.max_explain_passes,
        )
        return (passes, self.decoding_guard)

    def explain(self, parsed: list[PendingImages | ImageRequest | RequestError]) -> list[Any]:
        """A map over the model's input pixels per image (handlers/digits/explain.py), of the
        requests the explanation budgets admitted (`explain_budgets`)."""
        admitted = self.predictor.decoded(parsed)
        return [
            Explanations(tuple(self.explainer.explain(g) for g in r.images), r.many)
            if isinstance(r, ImageRequest)
            else r
            for r in admitted
        ]

    def report(self, answers: list[DigitsAnswer], telemetry: Telemetry) -> None:
        self.predictor.report(answers, telemetry)


MODEL = DigitsModel
"""This model's entry in the registry (handlers/registry.py)."""
