"""The image kit's pixel attributions: which pixels made the model read this image its label, an
attribution per model-input pixel, from Captum.

The image is first brought to the export's input size (handlers/kits/image/reading.py), so the map is
over exactly the pixels the network sees ([H][W], H x W from the manifest: 8 x 8 for the CNN,
16 x 16 for the ResNet-shaped export). Methods over the served runtime, each pixel a feature,
baseline 0 (no ink), the value the label's calibrated log-odds: Captum's `FeatureAblation`
(leave-one-pixel-out, the default: docs/explanations.md has its deletion curves) or
`ShapleyValueSampling` (coalitions of pixels).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from handlers.explain import JsonExplanation
from handlers.kits.image.reading import graph_batch, read, resize

METHODS = ("ablation", "shapley")


@dataclass(frozen=True)
class PixelExplanation(JsonExplanation):
    target: str
    probability: float
    attributions: np.ndarray
    """(H, W) float32 over the model's input pixels: > 0 pushes toward the target label."""
    method: str
    evaluations: int
    model: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "probability": round(self.probability, 6),
            "shape": list(self.attributions.shape),
            "attributions": self.attributions,
            "method": self.method,
            "evaluations": self.evaluations,
            "model": self.model,
        }


def log_odds(logits: np.ndarray, temperature: float) -> np.ndarray:
    """(B, C) logits → (B, C) calibrated log-odds of each label against all the others."""
    z = logits.astype(np.float64) / temperature
    z = z - z.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    out = np.empty_like(log_p)
    for c in range(log_p.shape[-1]):
        rest = np.delete(log_p, c, axis=-1)
        m = rest.max(-1)
        out[:, c] = log_p[:, c] - (m + np.log(np.exp(rest - m[:, None]).sum(-1)))
    return out


class PixelExplainer:
    def __init__(
        self, predictor: Any, method: str = "ablation", samples: int = 8, batch: int = 256
    ):
        if method not in METHODS:
            raise ValueError(f"method {method!r}: one of {METHODS}")
        self.predictor = predictor
        self.method = method
        self.samples = samples
        """Shapley sampling: permutations drawn (each costs one pass per pixel)."""
        self.batch = batch

    def cost(self) -> int:
        """Forward passes (images through the model) per explained image."""
        _, h, w = self.predictor.settings.export.input_shape
        return h * w * (self.samples if self.method == "shapley" else 1) + 1

    def explain(
        self, grey: np.ndarray, target: str | None = None, seed: int = 0
    ) -> PixelExplanation:
        import torch
        from captum.attr import FeatureAblation, ShapleyValueSampling

        p = self.predictor
        export = p.settings.export
        _, h, w = export.input_shape
        # The map is over the image as the network reads it: polarity, levels and framing done.
        x = resize(read(grey, export.native_size).grey, h, w)
        evaluations = 0

        def forward(images: torch.Tensor) -> torch.Tensor:
            nonlocal evaluations
            arr = images.detach().numpy()
            evaluations += len(arr)
            out = []
            for i in range(0, len(arr), self.batch):
                batch = graph_batch(list(arr[i : i + self.batch]), export)
                logits = p.runtime.run({export.input_name: batch})[export.output_name]
                out.append(log_odds(logits, export.temperature))
            return torch.from_numpy(np.concatenate(out))

        [cls] = p.classify([grey])
        idx = list(export.classes).index(cls.label if target is None else target)
        inputs = torch.from_numpy(x[None].astype(np.float32))
        args = {
            "baselines": 0.0,
            "target": idx,
            "feature_mask": torch.arange(h * w).reshape(1, h, w),
            "perturbations_per_eval": self.batch,
        }
        if self.method == "shapley":
            torch.manual_seed(seed)  # Captum draws its permutations from torch's generator
            attr = ShapleyValueSampling(forward).attribute(inputs, n_samples=self.samples, **args)
        else:
            attr = FeatureAblation(forward).attribute(inputs, **args)
        label = export.classes[idx]
        return PixelExplanation(
            target=label,
            probability=float(cls.probabilities[label]),
            attributions=attr[0].numpy().astype(np.float32),
            method=self.method,
            evaluations=evaluations,
            model=dict(p.model_info),
        )
