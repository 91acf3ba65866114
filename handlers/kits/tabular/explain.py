"""Per-feature attributions of a record: Captum over the served runtime's forward pass, one feature
(all its one-hot columns) at a time against its training baseline, for the target label's calibrated
log-odds; `Attributor.passes` is an explanation's cost model (forward passes per record)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from handlers.explain import JsonExplanation
from handlers.kits.tabular.schema import Schema


def log_odds(logits: np.ndarray, temperature: float) -> np.ndarray:
    """(B, C) logits → (B, C) calibrated log-odds of each label against all the others."""
    z = np.asarray(logits, np.float64) / temperature
    log_p = z - np.logaddexp.reduce(z, axis=-1, keepdims=True)
    rest = np.stack(
        [np.logaddexp.reduce(np.delete(log_p, c, -1), -1) for c in range(z.shape[-1])], -1
    )
    return log_p - rest


@dataclass(frozen=True)
class Attributor:
    """Per-feature attributions of one record: Captum's FeatureAblation (each feature, all its
    columns, set to its training baseline) or ShapleyValueSampling, over `forward` ((N, width)
    encoded records → (N, C) scores, the served runtime's), for the target's score."""

    schema: Schema
    forward: Callable[[np.ndarray], np.ndarray]
    method: str = "ablation"
    samples: int = 8
    """Shapley sampling: permutations (each one pass per feature)."""

    def passes(self) -> int:
        """Forward passes per explained record: the cost model of an explanation."""
        n = len(self.schema.features)
        return n * (self.samples if self.method == "shapley" else 1) + 1

    def attribute(self, x: np.ndarray, target: int) -> tuple[dict[str, float], int]:
        """(feature → attribution, forward passes made) for one encoded record `x` (width,)."""
        import torch
        from captum.attr import FeatureAblation, ShapleyValueSampling

        evaluations = 0

        def forward(batch: torch.Tensor) -> torch.Tensor:
            nonlocal evaluations
            arr = batch.detach().numpy()
            evaluations += len(arr)
            return torch.from_numpy(np.asarray(self.forward(arr), np.float64))

        groups = self.schema.groups()
        args = {
            "baselines": torch.from_numpy(self.schema.baseline()[None]),
            "target": target,
            "feature_mask": torch.from_numpy(groups[None]),
            "perturbations_per_eval": len(self.schema.features),
        }
        inputs = torch.from_numpy(x[None].astype(np.float32))
        if self.method == "shapley":
            torch.manual_seed(0)  # Captum draws its permutations from torch's generator
            attr = ShapleyValueSampling(forward).attribute(inputs, n_samples=self.samples, **args)
        else:
            attr = FeatureAblation(forward).attribute(inputs, **args)
        first = np.searchsorted(groups, np.arange(len(self.schema.features)))
        values = attr[0].numpy()[first]
        return {
            f.name: float(v) for f, v in zip(self.schema.features, values, strict=True)
        }, evaluations


@dataclass(frozen=True)
class FeatureExplanation(JsonExplanation):
    """One record's explanation: each feature's attribution to the target label's calibrated
    log-odds (> 0 pushes toward it), against the feature's training baseline."""

    target: str
    probability: float
    attributions: dict[str, float]
    method: str
    evaluations: int
    out_of_range: list[str]
    model: dict

    def to_json(self) -> dict:
        block = {f.name: getattr(self, f.name) for f in fields(self)}
        return block | {"probability": round(self.probability, 6)}
