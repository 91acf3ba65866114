"""Uncertainty maths shared by the handlers: temperature-calibrated probabilities, entropy, and a
cheap MC-dropout spread that samples only the small head over one deterministic encoder pass.

The dropout masks are drawn once, with a fixed seed, when the head is loaded: every input sees the
same `samples` thinned heads, so a prediction does not depend on which requests it was batched
with, and the in-process and served answers are identical.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_ACTIVATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "": lambda x: x,
    "none": lambda x: x,
    "relu": lambda x: np.maximum(x, 0.0),
    "tanh": np.tanh,
    "gelu": lambda x: 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x**3))),
}


@dataclass(frozen=True)
class MLPHead:
    """Dropout → Linear (→ activation) per layer: the stochastic part of a model."""

    weights: tuple[np.ndarray, ...]
    """One (out, in) matrix per layer, as torch.nn.Linear stores them."""
    biases: tuple[np.ndarray, ...]
    activations: tuple[str, ...]
    """Activation after each layer: relu, tanh, gelu or none (the last layer is usually none)."""
    dropout: float
    """Dropout probability applied before every linear layer when sampling."""

    @classmethod
    def load(cls, path: str | Path) -> MLPHead:
        data = np.load(path, allow_pickle=False)
        n = int(data["num_layers"])
        return cls(
            weights=tuple(data[f"W{i}"].astype(np.float32) for i in range(n)),
            biases=tuple(data[f"b{i}"].astype(np.float32) for i in range(n)),
            activations=tuple(str(a) for a in data["activations"]),
            dropout=float(data["dropout"]),
        )

    def save(self, path: str | Path) -> None:
        arrays = {f"W{i}": w for i, w in enumerate(self.weights)}
        arrays |= {f"b{i}": b for i, b in enumerate(self.biases)}
        arrays |= {
            "num_layers": np.array(len(self.weights)),
            "activations": np.array(self.activations),
            "dropout": np.array(self.dropout, dtype=np.float32),
        }
        np.savez(path, **arrays)  # type: ignore[arg-type]  # numpy's stub types **kwds as allow_pickle

    def masks(self, samples: int, seed: int = 0) -> tuple[np.ndarray, ...]:
        """Fixed inverted-dropout masks, (samples, in_features) per layer."""
        rng = np.random.default_rng(seed)
        keep = 1.0 - self.dropout
        return tuple(
            (rng.random((samples, w.shape[1])) < keep).astype(np.float32) / keep
            for w in self.weights
        )

    def forward(self, x: np.ndarray, masks: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
        """Deterministic pass (masks None) on (..., in) → (..., out); with masks, (S, ..., out)."""
        x = x.astype(np.float32, copy=False)
        if masks is not None:
            x = x[None]
        for i, (w, b, act) in enumerate(
            zip(self.weights, self.biases, self.activations, strict=True)
        ):
            if masks is not None:
                m = masks[i]
                x = x * m.reshape(m.shape[0], *([1] * (x.ndim - 2)), m.shape[1])
            x = _ACTIVATIONS[act](x @ w.T + b)
        return x


def softmax(logits: np.ndarray, temperature: float = 1.0, axis: int = -1) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def entropy(probs: np.ndarray, axis: int = -1) -> np.ndarray:
    """Shannon entropy in nats."""
    p = np.clip(probs, 1e-12, 1.0)
    return -(p * np.log(p)).sum(axis=axis)


SCORES = ("entropy", "mutual_information", "std")
"""The per-prediction scores of a classification answer's `uncertainty` block (beside `samples`,
a count), as ClassUncertainty names them: every kit's answer, tensor and metric lists these."""


@dataclass(frozen=True)
class ClassUncertainty:
    probabilities: np.ndarray
    """(B, C) temperature-calibrated probabilities of the deterministic pass."""
    entropy: np.ndarray
    """(B,) predictive entropy of those probabilities, nats."""
    mutual_information: np.ndarray
    """(B,) BALD: entropy of the mean MC prediction minus the mean entropy of the samples."""
    std: np.ndarray
    """(B,) standard deviation over MC samples of the predicted class's probability."""
    samples: int


def classify_with_uncertainty(
    features: np.ndarray, head: MLPHead, masks: tuple[np.ndarray, ...], temperature: float
) -> ClassUncertainty:
    """features (B, D) → calibrated probabilities and MC-dropout spread from the head alone.

    Each row goes through the head alone: BLAS picks its kernel, and so the order of a dot
    product's terms, by the matrix's shape, so over a whole batch a row's answer moved in its last
    bits with its neighbours (a served text's mutual information by 1.2e-7). Alone, a row's answer
    is bitwise the same in any batch."""
    if len(features) <= 1:
        return _classify(features, head, masks, temperature)
    rows = [_classify(features[i : i + 1], head, masks, temperature) for i in range(len(features))]
    return ClassUncertainty(
        probabilities=np.concatenate([r.probabilities for r in rows]),
        entropy=np.concatenate([r.entropy for r in rows]),
        mutual_information=np.concatenate([r.mutual_information for r in rows]),
        std=np.concatenate([r.std for r in rows]),
        samples=int(masks[0].shape[0]),
    )


def _classify(
    features: np.ndarray, head: MLPHead, masks: tuple[np.ndarray, ...], temperature: float
) -> ClassUncertainty:
    probs = softmax(head.forward(features), temperature)
    sample_probs = softmax(head.forward(features, masks), temperature)  # (S, B, C)
    mean = sample_probs.mean(axis=0)
    mi = entropy(mean) - entropy(sample_probs).mean(axis=0)
    predicted = probs.argmax(axis=-1)
    chosen = np.take_along_axis(sample_probs, predicted[None, :, None], axis=-1)[..., 0]
    return ClassUncertainty(
        probabilities=probs,
        entropy=entropy(probs),
        mutual_information=np.maximum(mi, 0.0),
        std=chosen.std(axis=0),
        samples=int(masks[0].shape[0]),
    )
