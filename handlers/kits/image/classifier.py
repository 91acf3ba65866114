"""The image kit's classifier: image requests → typed classifications → response bodies. Plain: no
TorchServe, used by the handler and, unchanged, in-process by tests and tools.

The network is whatever the export is: the graph's input name, shape, layout, channels,
normalisation and classes come from the manifest (settings.py), so a ResNet-shaped export at another
input size serves through this class unchanged. Every image of a batch goes through one runtime
call; the batch's work is bounded in images and decoded bytes (the kit's model's `budgets`).

Uncertainty as sentiment's: the graph answers (logits, features); the export's dropout → linear
head (head.npz) is sampled over the features with dropout masks drawn once at load (mc_samples,
seed), so an image's entropy, mutual information and std do not depend on its batch neighbours.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from handlers.codec import Reply
from handlers.errors import ArchiveError, RequestError
from handlers.kits.image.decode import ImageRequest, PendingImages, decode_request, read_request
from handlers.kits.image.reading import POLARITIES, Reading, graph_batch, read
from handlers.kits.image.settings import ImageSettings
from handlers.predictor import Predictor
from handlers.runtime import Runtime, core_slots, load_runtime
from handlers.service import Request
from handlers.uncertainty import MLPHead, classify_with_uncertainty


@dataclass(frozen=True)
class Classification:
    """One image's answer."""

    label: str
    probabilities: dict[str, float]
    """Calibrated softmax(logits / T), keyed by label."""
    entropy: float
    """Entropy of `probabilities` (nats): 0 when sure, log(classes) when it cannot tell."""
    mutual_information: float = 0.0
    """BALD over the MC-dropout samples of the head (nats): how much the thinned heads disagree."""
    std: float = 0.0
    """Standard deviation over the samples of the predicted label's probability."""
    samples: int = 0
    """MC-dropout samples behind mutual_information and std."""
    polarity: str = POLARITIES[0]
    digits_found: int | None = None
    """As the image was read: reading.py's `Reading`."""

    def uncertainty(self) -> dict[str, float | int]:
        return {
            "entropy": self.entropy,
            "mutual_information": self.mutual_information,
            "std": self.std,
            "samples": self.samples,
        }


@dataclass(frozen=True)
class ImageAnswer:
    """The answer to one request: one classification per image sent."""

    predictions: tuple[Classification, ...]
    many: bool
    """The request sent {"images": [...]}: the body is a list."""
    model: Mapping[str, str] = field(default_factory=dict)
    """The `model` block of each row (name, version, arch)."""

    def rows(self) -> list[dict]:
        """One row per image (the JSON answer's; oip.py writes their tensors)."""
        return [
            {
                "label": c.label,
                "probabilities": c.probabilities,
                "uncertainty": c.uncertainty(),
                "polarity": c.polarity,
                "digits_found": c.digits_found,
                "model": dict(self.model),
            }
            for c in self.predictions
        ]

    def to_row(self) -> dict | list[dict]:
        """The JSON answer's value (scoring's row): the rows, or the row alone for {"image"}."""
        rows = self.rows()
        return rows if self.many else rows[0]

    def reply(self) -> Reply:
        return Reply(json.dumps(self.to_row()), "application/json", {})


class ImagePredictor(Predictor[ImageSettings]):
    """A model of the kit names itself (`model`) and its `parse_settings` in a subclass."""

    def __init__(
        self,
        model_dir: str | Path,
        settings: ImageSettings,
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
            (export.output_name, export.features_name),
            device,
            settings.threads,
            spinning=settings.intra_op_spinning,
            slots=core_slots(model_dir, settings.threads, settings.share_cores),
        )
        head_path = Path(model_dir) / export.head
        if not head_path.is_file():
            raise ArchiveError(f"the archive has no {export.head} (the uncertainty head)")
        self.head = MLPHead.load(head_path)
        if self.head.weights[-1].shape[0] != len(export.classes):
            raise ArchiveError(
                f"{export.head} has {self.head.weights[-1].shape[0]} outputs for "
                f"{len(export.classes)} classes"
            )
        # Drawn once: every image sees the same thinned heads, whatever it is batched with.
        self.masks = self.head.masks(settings.mc_samples, settings.seed)
        self._self_check()

    def _self_check(self) -> None:
        """A manifest that does not describe its graph (shape, layout, classes) fails the load."""
        native = self.settings.export.native_size
        probe: list[np.ndarray] = [
            np.zeros(native, np.float32),
            np.linspace(0, 1, native[0] * native[1], dtype=np.float32).reshape(native),
        ]
        try:
            logits, features, _ = self._read_and_forward(probe)
        except Exception as e:
            raise ArchiveError(f"the graph does not take the manifest's input: {e}") from e
        classes = len(self.settings.export.classes)
        if logits.shape != (2, classes) or not np.isfinite(logits).all():
            raise ArchiveError(
                f"the graph answers {logits.shape} for 2 images, not (2, {classes}) finite logits"
            )
        # A head.npz that does not belong to this export would give plausible-looking nonsense.
        try:
            diff = float(np.max(np.abs(self.head.forward(features) - logits)))
        except ValueError as e:
            raise ArchiveError(f"the head does not take the graph's features: {e}") from e
        if not diff <= self.settings.self_check_atol:
            raise ArchiveError(
                f"{self.settings.export.head} does not reproduce the graph's logits "
                f"(max |diff| {diff:.3g})"
            )

    def _read_and_forward(
        self, greys: list[np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray, list[Reading]]:
        """(logits, features, the reading of each image: polarity, digits found)."""
        export = self.settings.export
        readings = [read(g, export.native_size) for g in greys]
        batch = graph_batch([r.grey for r in readings], export)
        out = self.runtime.run({export.input_name: batch})
        return out[export.output_name], out[export.features_name], readings

    # The request's side.
    def decode(self, request: Request) -> ImageRequest:
        """Read and decode at once, each image at its own size (tools; the server reads, admits,
        then decodes: `read`, `decoded`)."""
        return decode_request(request, self.settings)

    def read(self, request: Request) -> PendingImages:
        """The request's images read from their headers, checked and priced: nothing decoded."""
        return read_request(request, self.settings)

    def decoded(self, parsed: list[Any]) -> list[Any]:
        """Read requests the batch's budgets admitted (the decoding guard among them,
        `max_batch_decoded_bytes`), decoded one image at a time, each shrunk at once to the size
        the reading works at (reading.working_factor). A file found truncated or corrupt while
        decoding is that request's 400 alone."""
        out: list[Any] = []
        for r in parsed:
            try:
                out.append(
                    r.decode(self.settings, shrink=True) if isinstance(r, PendingImages) else r
                )
            except RequestError as err:
                out.append(err)
        return out

    def classify(self, greys: list[np.ndarray]) -> list[Classification]:
        """Grey images ((H, W) in [0, 1], any size the codec accepts) → one answer each."""
        if not greys:
            return []
        export = self.settings.export
        _, features, readings = self._read_and_forward(greys)
        u = classify_with_uncertainty(features, self.head, self.masks, export.temperature)
        return [
            Classification(
                export.classes[int(np.argmax(p))],
                {label: float(v) for label, v in zip(export.classes, p, strict=True)},
                float(u.entropy[i]),
                float(u.mutual_information[i]),
                float(u.std[i]),
                u.samples,
                readings[i].polarity,
                readings[i].digits_found,
            )
            for i, p in enumerate(u.probabilities)
        ]

    def predict(self, parsed: list[Any]) -> list[ImageAnswer | RequestError]:
        """The batch's admitted requests (read `PendingImages` or decoded `ImageRequest`s,
        RequestErrors among them) → one answer or error each, in order (the budgets were applied
        before: the model's `budgets`)."""
        admitted = self.decoded(parsed)
        run = [r for r in admitted if isinstance(r, ImageRequest)]
        answers = iter(self.classify([g for r in run for g in r.images]))
        return [
            ImageAnswer(tuple(next(answers) for _ in r.images), r.many, self.model_info)
            if isinstance(r, ImageRequest)
            else r
            for r in admitted
        ]
