"""Texts → response dicts: tokenize, one runtime pass, calibrated probabilities and the MC-dropout
spread of the head. Used by the TorchServe handler and, unchanged, in-process by tests and tools.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from handlers.errors import ArchiveError
from handlers.manifest import read_manifest
from handlers.runtime import Runtime, load_runtime
from handlers.sentiment.settings import SentimentSettings, parse_settings
from handlers.sentiment.tokenize import TextEncoder
from handlers.uncertainty import MLPHead, classify_with_uncertainty

UNCERTAINTY_SCORES = ("entropy", "mutual_information", "std")
"""The per-prediction scores of an answer's `uncertainty` block (beside `samples`, a count)."""

SELF_CHECK_TEXTS = ["a short one", "a somewhat longer text to check that padding is masked out"]


class SentimentPredictor:
    def __init__(
        self,
        model_dir: str | Path,
        settings: SentimentSettings,
        device: str = "cpu",
        name: str = "sentiment",
    ):
        model_dir = Path(model_dir)
        self.settings = settings
        self.name = name
        self.encoder = TextEncoder(
            model_dir / settings.tokenizer_file,
            settings.max_length,
            settings.pad_token_id,
            settings.head_tokens,
        )
        self.runtime: Runtime = load_runtime(
            settings.runtime,
            model_dir,
            settings.input_names,
            settings.output_names,
            device,
            settings.threads,
        )
        self.head = MLPHead.load(model_dir / settings.head_file)
        if (
            settings.feature_dim is not None
            and self.head.weights[0].shape[1] != settings.feature_dim
        ):
            raise ArchiveError(
                f"head takes {self.head.weights[0].shape[1]} features, the manifest says "
                f"{settings.feature_dim}"
            )
        if self.head.weights[-1].shape[0] != len(settings.labels):
            raise ArchiveError(
                f"head has {self.head.weights[-1].shape[0]} outputs for labels {settings.labels}"
            )
        # Drawn once: every text sees the same thinned heads, whatever it is batched with.
        self.masks = self.head.masks(settings.mc_samples, settings.seed)
        self._self_check()

    @classmethod
    def from_dir(
        cls,
        model_dir: str | Path,
        config: dict | None = None,
        device: str = "cpu",
        name: str = "sentiment",
    ):
        """Load from a directory holding manifest.json and the exported files (artifact dir or
        unpacked archive); `config` is the model-config's `handler:` block."""
        return cls(model_dir, parse_settings(read_manifest(model_dir), config), device, name)

    def _self_check(self) -> None:
        # A head.npz that does not belong to this export would give plausible-looking nonsense.
        logits, features = self._forward(SELF_CHECK_TEXTS)[:2]
        diff = float(np.max(np.abs(self.head.forward(features) - logits)))
        if not diff <= self.settings.self_check_atol:
            raise ArchiveError(
                f"head.npz does not reproduce the graph's logits (max |diff| {diff:.3g})"
            )

    def _forward(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray, tuple[bool, ...]]:
        batch = self.encoder.encode(texts)
        ids_name, mask_name = self.settings.input_names[:2]
        out = self.runtime.run({ids_name: batch.input_ids, mask_name: batch.attention_mask})
        logits_name, features_name = self.settings.output_names[:2]
        return out[logits_name], out[features_name], batch.truncated

    def predict(self, texts: list[str]) -> list[dict]:
        """One response dict per text, in order; all texts go through the runtime in one pass."""
        if not texts:
            return []
        _, features, truncated = self._forward(texts)
        u = classify_with_uncertainty(features, self.head, self.masks, self.settings.temperature)
        labels = self.settings.labels
        model = {"name": self.name, "version": self.settings.version}
        return [
            {
                "label": labels[int(np.argmax(u.probabilities[i]))],
                "probabilities": {
                    lab: float(p) for lab, p in zip(labels, u.probabilities[i], strict=True)
                },
                "uncertainty": {
                    "entropy": float(u.entropy[i]),
                    "mutual_information": float(u.mutual_information[i]),
                    "std": float(u.std[i]),
                    "samples": u.samples,
                },
                "truncated": truncated[i],
                "model": dict(model),
            }
            for i in range(len(texts))
        ]
