"""Image requests → typed classifications → response bodies. Plain: no TorchServe, used by the
handler and, unchanged, in-process by tests and tools.

The network is whatever the export is: the graph's input name, shape, layout, channels,
normalisation and classes come from the manifest (settings.py), so a ResNet-shaped export at another
input size serves through this class unchanged. Every image of a batch goes through one runtime
call; the batch's work is bounded in images (handlers/budget.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from handlers.budget import within_budget
from handlers.codec import Reply
from handlers.digits.codec import ImageRequest, decode_request
from handlers.digits.pixels import model_batch
from handlers.digits.settings import DigitsSettings, parse_settings
from handlers.errors import ArchiveError, RequestError
from handlers.predictor import Predictor
from handlers.runtime import Runtime, load_runtime


@dataclass(frozen=True)
class Classification:
    """One image's answer."""

    label: str
    probabilities: dict[str, float]
    """Calibrated softmax(logits / T), keyed by label."""
    entropy: float
    """Entropy of `probabilities` (nats): 0 when sure, log(classes) when it cannot tell."""


@dataclass(frozen=True)
class DigitsAnswer:
    """The answer to one request: one classification per image sent."""

    predictions: tuple[Classification, ...]
    many: bool
    """The request sent {"images": [...]}: the body is a list."""


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(logits, np.float64) / temperature
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


class DigitsPredictor(Predictor[DigitsSettings]):
    model = "digits"
    parse_settings = staticmethod(parse_settings)

    def __init__(
        self,
        model_dir: str | Path,
        settings: DigitsSettings,
        device: str = "cpu",
        name: str | None = None,
    ):
        super().__init__(model_dir, settings, device, name)
        export = settings.export
        self.model_info = self.model_info | {"arch": export.arch}
        self.runtime: Runtime = load_runtime(
            settings.runtime,
            model_dir,
            (export.input_name,),
            (export.output_name,),
            device,
            settings.threads,
        )
        self._self_check()

    def _self_check(self) -> None:
        """A manifest that does not describe its graph (shape, layout, classes) fails the load."""
        blank = [np.zeros(self.settings.export.native_size, np.float32)] * 2
        try:
            logits = self._logits(blank)
        except Exception as e:
            raise ArchiveError(f"the graph does not take the manifest's input: {e}") from e
        classes = len(self.settings.export.classes)
        if logits.shape != (2, classes) or not np.isfinite(logits).all():
            raise ArchiveError(
                f"the graph answers {logits.shape} for 2 images, not (2, {classes}) finite logits"
            )

    def _logits(self, greys: list[np.ndarray]) -> np.ndarray:
        export = self.settings.export
        out = self.runtime.run({export.input_name: model_batch(greys, export)})
        return out[export.output_name]

    # The request's side.
    def decode(self, row: dict, headers: dict) -> ImageRequest:
        return decode_request(row, headers, self.settings)

    def classify(self, greys: list[np.ndarray]) -> list[Classification]:
        """Grey images ((H, W) in [0, 1], any size the codec accepts) → one answer each."""
        if not greys:
            return []
        export = self.settings.export
        probs = softmax(self._logits(greys), export.temperature)
        entropy = -(probs * np.log(np.clip(probs, 1e-12, None))).sum(axis=-1)
        return [
            Classification(
                export.classes[int(np.argmax(p))],
                {label: float(v) for label, v in zip(export.classes, p, strict=True)},
                float(h),
            )
            for p, h in zip(probs, entropy, strict=True)
        ]

    def predict(self, parsed: list[Any]) -> list[DigitsAnswer | RequestError]:
        """The batch's parsed requests (RequestErrors among them) → one answer or error each, in
        order; requests past the batch's image budget become 503 + Retry-After."""
        costs = [len(r.images) if isinstance(r, ImageRequest) else None for r in parsed]
        admitted = within_budget(parsed, costs, self.settings.max_batch_images, "images")
        run = [r for r in admitted if isinstance(r, ImageRequest)]
        answers = iter(self.classify([g for r in run for g in r.images]))
        return [
            DigitsAnswer(tuple(next(answers) for _ in r.images), r.many)
            if isinstance(r, ImageRequest)
            else r
            for r in admitted
        ]

    # The answer's side: the one place an answer is serialised.
    def body(self, answer: DigitsAnswer) -> dict | list[dict]:
        rows = [
            {
                "label": c.label,
                "probabilities": c.probabilities,
                "uncertainty": {"entropy": c.entropy},
                "model": dict(self.model_info),
            }
            for c in answer.predictions
        ]
        return rows if answer.many else rows[0]

    def reply(self, answer: DigitsAnswer) -> Reply:
        return Reply(json.dumps(self.body(answer)), "application/json", {})

    @staticmethod
    def report(answers: list[DigitsAnswer], telemetry: Any) -> None:
        """Predicted labels and each answer's entropy, for the operator (handlers/telemetry.py)."""
        predictions = [c for a in answers for c in a.predictions]
        telemetry.predictions(c.label for c in predictions)
        telemetry.uncertainty("entropy", [c.entropy for c in predictions])
