"""The text kit's classifier: texts → response dicts: tokenize (the export's own tokenizer,
head+tail truncation), one runtime pass, calibrated probabilities and the MC-dropout spread of the
head. Plain: no TorchServe, used by the handler and, unchanged, in-process by tests and tools.

The network is whatever the export is: the graph's input and output names, labels, length,
truncation and tokenizer come from the manifest (settings.py). A model of the kit names itself
(`model`), its `parse_settings` and, if it likes, its own probe texts in a subclass.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
from threadpoolctl import ThreadpoolController

from handlers.errors import ArchiveError
from handlers.kits.text.settings import TextSettings
from handlers.kits.text.tokenize import EncodedBatch, TextEncoder
from handlers.predictor import Predictor
from handlers.runtime import Runtime, core_slots, load_runtime, resolve_runtime
from handlers.uncertainty import MLPHead, classify_with_uncertainty

SELF_CHECK_TEXTS = ["a short one", "a somewhat longer text to check that padding is masked out"]
FP16_PROBE_TEXTS = [
    *SELF_CHECK_TEXTS,
    "A longer text, repeated to fill the window so that the probe is truncated as well. " * 12,
]


class TextPredictor(Predictor[TextSettings]):
    """A model of the kit names itself (`model`) and its `parse_settings` in a subclass."""

    self_check_texts: ClassVar[list[str]] = SELF_CHECK_TEXTS
    """Run at load through the graph and the head: the head must reproduce the graph's logits."""
    fp16_probe_texts: ClassVar[list[str]] = FP16_PROBE_TEXTS
    """fp16's parity gate runs these through float32 and float16 (a model may name its own)."""

    def __init__(
        self,
        model_dir: str | Path,
        settings: TextSettings,
        device: str = "cpu",
        name: str | None = None,
    ):
        super().__init__(model_dir, settings, device, name)
        model_dir = Path(model_dir)
        self.encoder = TextEncoder(
            model_dir / settings.export.tokenizer,
            settings.max_length or settings.export.max_length,
            settings.export.pad_token_id,
            settings.export.kept_head(),
        )
        self.runtime_kind, self.runtime_reason = resolve_runtime(
            settings.runtime, model_dir, device
        )
        self._slots = core_slots(model_dir, settings.threads, settings.share_cores)
        self.runtime: Runtime = self._open(model_dir, device, settings.fp16)
        self.head = MLPHead.load(model_dir / settings.export.head)
        if (
            settings.export.feature_dim is not None
            and self.head.weights[0].shape[1] != settings.export.feature_dim
        ):
            raise ArchiveError(
                f"head takes {self.head.weights[0].shape[1]} features, the manifest says "
                f"{settings.export.feature_dim}"
            )
        if self.head.weights[-1].shape[0] != len(settings.export.labels):
            raise ArchiveError(
                f"head has {self.head.weights[-1].shape[0]} outputs for labels {settings.export.labels}"
            )
        # Drawn once: every text sees the same thinned heads, whatever it is batched with.
        self.masks = self.head.masks(settings.mc_samples, settings.seed)
        self._blas = ThreadpoolController()
        if settings.fp16:
            self._fp16_gate(self._open(model_dir, device, fp16=False))
        self._self_check()

    def _open(self, model_dir: Path, device: str, fp16: bool) -> Runtime:
        s = self.settings
        return load_runtime(
            self.runtime_kind,
            model_dir,
            s.export.input_names,
            s.export.output_names,
            device,
            s.threads,
            fp16=fp16,
            spinning=s.intra_op_spinning,
            slots=self._slots,
        )

    def _fp16_gate(self, fp32: Runtime) -> None:
        """fp16's parity gate, run where it will serve (the export machine may have no GPU): the
        same probe texts through float32 and float16 must agree within fp16_atol and on labels."""
        feeds = self.feed(self.encoder.encode(self.fp16_probe_texts))
        want, got = fp32.run(feeds), self.runtime.run(feeds)
        diff = max(
            float(np.max(np.abs(want[n] - got[n]))) for n in self.settings.export.output_names
        )
        logits = self.settings.export.output_names[0]
        same = np.array_equal(want[logits].argmax(-1), got[logits].argmax(-1))
        if not (diff <= self.settings.fp16_atol and same):
            raise ArchiveError(
                f"fp16 parity gate failed on {self.runtime.device}: max |diff| {diff:.3g} "
                f"(limit {self.settings.fp16_atol}), same labels: {same}; serve with fp16: false"
            )
        self.fp16_max_abs_diff = diff

    def _self_check(self) -> None:
        # A head.npz that does not belong to this export would give plausible-looking nonsense.
        logits, features = self._forward(self.self_check_texts)[:2]
        diff = float(np.max(np.abs(self.head.forward(features) - logits)))
        atol = self.settings.self_check_atol
        if self.settings.fp16:  # the graph's head ran in float16, the numpy head in float32
            atol = max(atol, self.settings.fp16_atol)
        if not diff <= atol:
            raise ArchiveError(
                f"head.npz does not reproduce the graph's logits (max |diff| {diff:.3g})"
            )

    @property
    def per_text(self) -> bool:
        """Whether each text runs alone (`texts_alone`; default: on a CPU, and always for int8).
        int8's activations are quantised with one scale per runtime call (ONNX Runtime's dynamic
        quantisation), so in a padded batch a text's answer would move with its neighbours;
        alone, its scale is its own. On a CPU, running alone costs nothing at equal lengths
        (docs/performance.md) and saves the padding to the longest neighbour at mixed lengths."""
        if self.runtime_kind == "onnx-int8":
            return True
        alone = self.settings.texts_alone
        return self.runtime.device == "cpu" if alone is None else alone

    def encoded_calls(
        self, texts: list[str], pieces: list[list[int]] | None = None
    ) -> list[EncodedBatch]:
        """The runtime calls `texts` take, in order: one padded batch, or one per text where
        texts run alone (`per_text`). Bench times exactly these."""
        if not self.per_text:
            return [self.encoder.encode(texts, pieces)]
        pieces = self.encoder.pieces(texts) if pieces is None else pieces
        return [self.encoder.encode([t], [p]) for t, p in zip(texts, pieces, strict=True)]

    def feed(self, batch: EncodedBatch) -> dict[str, np.ndarray]:
        """The runtime's inputs for one encoded batch."""
        ids_name, mask_name = self.settings.export.input_names[:2]
        return {ids_name: batch.input_ids, mask_name: batch.attention_mask}

    def _forward(
        self, texts: list[str], pieces: list[list[int]] | None = None
    ) -> tuple[np.ndarray, np.ndarray, tuple[bool, ...]]:
        calls = self.encoded_calls(texts, pieces)
        outs = [self.runtime.run(self.feed(batch)) for batch in calls]
        logits_name, features_name = self.settings.export.output_names[:2]
        return (
            np.concatenate([out[logits_name] for out in outs]),
            np.concatenate([out[features_name] for out in outs]),
            tuple(t for batch in calls for t in batch.truncated),
        )

    def masked_logits(self, ids: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """One runtime call over (P, T) ids and attention masks → (P, labels) calibrated logits of
        the head (no dropout): what an explanation scores each perturbed text with."""
        ids_name, mask_name = self.settings.export.input_names[:2]
        features = self.runtime.run({ids_name: ids, mask_name: masks})[
            self.settings.export.output_names[1]
        ]
        return self.head.forward(features) / self.settings.export.temperature

    def uncertainty(self, features: np.ndarray):
        """Calibrated probabilities and MC-dropout spread of the head over the encoder's features."""
        # The head's matmuls are tiny: waking OpenBLAS's thread pool for them costs far more
        # than they do on shared cores; one thread is the fast path.
        with self._blas.limit(limits=1, user_api="blas"):
            return classify_with_uncertainty(
                features, self.head, self.masks, self.settings.export.temperature
            )

    def predict(self, texts: list[str], pieces: list[list[int]] | None = None) -> list[dict]:
        """One response dict per text, in order; all texts go through the runtime in one pass.
        `pieces`: the texts' token ids from `encoder.pieces`, when the caller already has them."""
        if not texts:
            return []
        _, features, truncated = self._forward(texts, pieces)
        u = self.uncertainty(features)
        labels = self.settings.export.labels
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
                "model": dict(self.model_info),
            }
            for i in range(len(texts))
        ]
