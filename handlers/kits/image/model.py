"""The image kit's part of the lifecycle (handlers/service.py), which an image classifier takes
whole: read and price images from their headers, admit them within the batch's budgets (its cost
model: images, bytes decoded, explanation passes), decode, classify the batch's images in one
runtime call, answer with typed `ImageAnswer`s, explain with pixel attributions.

Nothing here names the network: a different architecture exported with the same manifest block
serves through it unchanged (classifier.py reads the graph's shape and layout). A model of the kit
is a subclass naming its predictor (handlers/digits/model.py).
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

from handlers.budget import Budget
from handlers.codec import Reply
from handlers.errors import RequestError
from handlers.explain import Explanations
from handlers.kits.image.classifier import ImageAnswer, ImagePredictor
from handlers.kits.image.decode import ImageRequest, PendingImages
from handlers.kits.image.settings import ImageSettings
from handlers.predictor import PredictorModel
from handlers.service import Request
from handlers.telemetry import Telemetry
from handlers.uncertainty import SCORES


class ImageModel(PredictorModel[ImagePredictor]):
    settings: ImageSettings

    @staticmethod
    def describe(predictor: ImagePredictor) -> str:
        s = predictor.settings
        e = s.export
        return f"arch={e.arch} input={list(e.input_shape)} {e.layout} runtime={s.runtime}"

    def parse(self, request: Request) -> PendingImages:
        """Read and priced from the image headers only: decoding waits until the batch's budgets
        have admitted the request (`budgets`, `explain_budgets`)."""
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
    ) -> list[ImageAnswer | RequestError]:
        return self.predictor.predict(parsed)

    def reply(self, answer: ImageAnswer) -> Reply:
        return answer.reply()

    @cached_property
    def explainer(self) -> Any:
        """Built on the first explanation: Captum and torch load only then."""
        from handlers.kits.image.explain import PixelExplainer

        s = self.settings
        return PixelExplainer(self.predictor, s.explain_method, s.explain_samples)

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
        """A map over the model's input pixels per image (handlers/kits/image/explain.py), of the
        requests the explanation budgets admitted (`explain_budgets`)."""
        admitted = self.predictor.decoded(parsed)
        return [
            Explanations(tuple(self.explainer.explain(g) for g in r.images), r.many)
            if isinstance(r, ImageRequest)
            else r
            for r in admitted
        ]

    def report(self, answers: list[ImageAnswer], telemetry: Telemetry) -> None:
        """Predicted labels and each answer's uncertainty scores, for the operator."""
        predictions = [c for a in answers for c in a.predictions]
        telemetry.predictions(c.label for c in predictions)
        for measure in SCORES:
            telemetry.uncertainty(measure, [getattr(c, measure) for c in predictions])
