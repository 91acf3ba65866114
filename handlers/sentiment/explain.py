"""Which words made the model say what it said: word attributions for one text, from Captum.

Method: `FeatureAblation` (leave-one-word-out) over the served runtime, with one feature per word of
the text. A word is removed by masking its tokens out of attention, the model's own notion of
"not there"; the attribution is how much the target label's calibrated probability drops without
it (signed: negative means the word pulled toward the other label). It needs only forward passes,
so it explains the exported ONNX/TorchScript graph that serves, not a separate eager copy, and
costs one pass per word (batched). docs/explanations.md compares it with Shapley sampling on
deletion curves.

Words are the text's runs of word characters (whitespace and punctuation separate them); each
tokenizer piece is summed into the word its characters belong to. Words cut by head+tail
truncation are not seen by the model: their attribution is 0 and the answer says `truncated`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

WORD = re.compile(r"\w+")
"""A word: a maximal run of letters, digits or underscores (whitespace and punctuation split)."""

METHODS = ("ablation", "shapley")
SCORES = ("log-odds", "probability")


@dataclass(frozen=True)
class WordAttribution:
    text: str
    start: int
    """Character offset of the word in the request's text."""
    end: int
    attribution: float
    """How much the target's score (log-odds by default) drops when the word is removed: > 0
    toward the target label, < 0 toward the others."""

    def to_json(self) -> dict:
        return {
            "text": self.text,
            "start": self.start,
            "end": self.end,
            "attribution": round(self.attribution, 6),
        }


@dataclass(frozen=True)
class SentimentExplanation:
    target: str
    """The label explained (the predicted one unless the request named another)."""
    probability: float
    """The target label's calibrated probability for the whole text."""
    words: tuple[WordAttribution, ...]
    method: str
    evaluations: int
    """Forward passes spent (texts run through the model)."""
    truncated: bool
    model: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "probability": round(self.probability, 6),
            "words": [w.to_json() for w in self.words],
            "method": self.method,
            "evaluations": self.evaluations,
            "truncated": self.truncated,
            "model": self.model,
        }


def word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in WORD.finditer(text)]


class SentimentExplainer:
    """Explains texts with a loaded `SentimentPredictor` (its tokenizer, runtime, head, temperature)."""

    def __init__(
        self,
        predictor: Any,
        method: str = "ablation",
        score: str = "log-odds",
        batch: int = 32,
        samples: int = 4,
    ):
        if method not in METHODS or score not in SCORES:
            raise ValueError(f"method {method!r}, score {score!r}: one of {METHODS}, {SCORES}")
        self.predictor = predictor
        self.method = method
        self.score = score
        """What a word's removal is measured in: the target's log-odds (does not saturate near
        0 or 1) or its probability."""
        self.batch = batch
        """Perturbed texts per runtime call."""
        self.samples = samples
        """Shapley sampling only: permutations drawn."""

    def cost(self, text: str) -> int:
        """Forward passes one explanation of `text` takes (the budget's unit, before running)."""
        words = len(word_spans(text)) + 1
        return words * self.samples if self.method == "shapley" else words

    def _tokens(self, text: str) -> tuple[list[int], list[int], bool]:
        """The runtime's row for `text` (special tokens, head+tail truncation) and, per position,
        the index of the word it belongs to (-1: special token, punctuation)."""
        enc = self.predictor.encoder
        e = enc.tokenizer.encode(text, add_special_tokens=False)
        ids, offsets = list(e.ids), list(e.offsets)
        keep = list(range(len(ids)))
        if len(ids) > enc.budget:
            head = min(enc.head_tokens, enc.budget)
            keep = keep[:head] + keep[len(ids) - (enc.budget - head) :]
        spans = word_spans(text)
        starts = [s for s, _ in spans]
        owner = []
        for i in keep:
            s, t = offsets[i]
            w = _word_at(starts, spans, s, t)
            owner.append(w)
        row = [*enc.prefix, *(ids[i] for i in keep), *enc.suffix]
        owners = [-1] * len(enc.prefix) + owner + [-1] * len(enc.suffix)
        return row, owners, len(ids) > enc.budget

    def _logits(self, ids: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """(P, T) ids and attention masks → (P, labels) calibrated logits, in batches."""
        p = self.predictor
        ids_name, mask_name = p.settings.input_names[:2]
        features_name = p.settings.output_names[1]
        out = []
        for i in range(0, len(masks), self.batch):
            m = masks[i : i + self.batch]
            feats = p.runtime.run({ids_name: ids[: len(m)], mask_name: m})[features_name]
            out.append(p.head.forward(feats) / p.settings.temperature)
        return np.concatenate(out).astype(np.float64)

    def explain(self, text: str, target: str | None = None) -> SentimentExplanation:
        import torch
        from captum.attr import FeatureAblation, ShapleyValueSampling

        labels = list(self.predictor.settings.labels)
        row, owners, truncated = self._tokens(text)
        spans = word_spans(text)
        seen = sorted({w for w in owners if w >= 0})
        n = len(seen)
        ids = np.tile(np.asarray(row, dtype=np.int64), (self.batch, 1))
        base_mask = np.ones(len(row), dtype=np.int64)
        # position → column of the word-presence vector (-1: always present)
        column = {w: j for j, w in enumerate(seen)}
        cols = np.array([column.get(w, -1) for w in owners])
        evaluations = 0

        def forward(present: torch.Tensor) -> torch.Tensor:
            nonlocal evaluations
            x = present.detach().numpy()
            masks = np.tile(base_mask, (len(x), 1))
            word_pos = cols >= 0
            masks[:, word_pos] = (x[:, cols[word_pos]] > 0.5).astype(np.int64)
            evaluations += len(x)
            return torch.from_numpy(_scores(self._logits(ids, masks), self.score))

        probabilities = _scores(self._logits(ids[:1], base_mask[None]), "probability")[0]
        idx = labels.index(target) if target is not None else int(np.argmax(probabilities))
        scores = np.zeros(n)
        if n:
            present = torch.ones(1, n)
            if self.method == "ablation":
                attr = FeatureAblation(forward).attribute(
                    present, baselines=0.0, target=idx, perturbations_per_eval=self.batch
                )
            else:
                attr = ShapleyValueSampling(forward).attribute(
                    present,
                    baselines=0.0,
                    target=idx,
                    n_samples=self.samples,
                    perturbations_per_eval=self.batch,
                )
            scores = attr[0].double().numpy()
        by_word = dict(zip(seen, scores, strict=True))
        words = tuple(
            WordAttribution(text[s:e], s, e, float(by_word.get(w, 0.0)))
            for w, (s, e) in enumerate(spans)
        )
        return SentimentExplanation(
            target=labels[idx],
            probability=float(probabilities[idx]),
            words=words,
            method=self.method,
            evaluations=evaluations,
            truncated=truncated,
            model=dict(self.predictor.model_info),
        )


def _scores(logits: np.ndarray, score: str) -> np.ndarray:
    """Per label: its probability, or its log-odds against all other labels together."""
    z = logits - logits.max(-1, keepdims=True)
    log_p = z - np.log(np.exp(z).sum(-1, keepdims=True))
    if score == "probability":
        return np.exp(log_p)
    # log p - log(1 - p), with log(1 - p) = logsumexp over the other labels
    others = np.stack(
        [np.log(np.exp(np.delete(log_p, c, axis=-1)).sum(-1)) for c in range(log_p.shape[-1])], -1
    )
    return log_p - others


def _word_at(starts: list[int], spans: list[tuple[int, int]], s: int, t: int) -> int:
    """The word whose characters [s, t) fall in, or -1 (punctuation, whitespace)."""
    import bisect

    i = bisect.bisect_right(starts, s) - 1
    if i >= 0 and spans[i][0] <= s and t <= spans[i][1] and t > s:
        return i
    return -1
