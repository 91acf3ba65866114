"""Which words made the model say what it said: word attributions for one text, from Captum.

Method (`hierarchical`, served): occlusion over the served runtime in two levels, with a fixed
number of forward passes whatever the text's length. A text of fewer words than its passes gets
leave-one-word-out (`FeatureAblation`, one pass per word). A longer one is cut into contiguous
groups of words; each group is left out once (level 1), then the groups that moved the score
most, as many as the remaining passes allow, have each of their words left out alone (level 2).
A word of a refined group gets its own effect; a word of any other group an equal share of its
group's. One explanation costs at most `passes` forward passes (48 by default), where plain
leave-one-word-out (`ablation`) costs one per word: about 230 for a typical movie review
(sentiment). docs/explanations.md compares them, Shapley sampling and KernelSHAP on deletion
curves.

A word is removed by masking its tokens out of attention, the model's own notion of "not there";
the attribution is how much the target label's calibrated log-odds drop without it (signed:
negative means the word pulled toward the other label). Only forward passes are needed, so the
exported ONNX/TorchScript graph that serves is what is explained, not a separate eager copy.

Words are the text's runs of word characters (whitespace and punctuation separate them); each
tokenizer piece is summed into the word its characters belong to. Words cut by head+tail
truncation are not seen by the model: their attribution is 0 and the answer says `truncated`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

WORD = re.compile(r"\w+")
"""A word: a maximal run of letters, digits or underscores (whitespace and punctuation split)."""

METHODS = ("hierarchical", "ablation", "shapley", "kernel-shap")
"""Served: `hierarchical` (the model-config's `explain_method`); `kernel-shap` needs scikit-learn,
which only the training environment installs, and is there for comparison."""
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
class TextExplanation:
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


class TextExplainer:
    """Explains texts with a loaded `TextPredictor` (classifier.py): its `encoder` (tokenizer,
    truncation, special tokens), `masked_logits` (the served graph and head, calibrated), its
    labels and `model_info`. Nothing here is one model's: any text classifier of the kit is
    explained the same way."""

    def __init__(
        self,
        predictor: Any,
        method: str = "hierarchical",
        score: str = "log-odds",
        batch: int = 32,
        samples: int = 4,
        passes: int = 48,
    ):
        if method not in METHODS or score not in SCORES:
            raise ValueError(f"method {method!r}, score {score!r}: one of {METHODS}, {SCORES}")
        if passes < 4:
            raise ValueError(f"passes {passes}: at least 4 (one unperturbed, three groups)")
        self.predictor = predictor
        self.method = method
        self.score = score
        """What a word's removal is measured in: the target's log-odds (does not saturate near
        0 or 1) or its probability."""
        self.batch = batch
        """Perturbed texts per runtime call."""
        self.samples = samples
        """Shapley sampling only: permutations drawn."""
        self.passes = passes
        """hierarchical and kernel-shap: forward passes per text, the unperturbed one included."""

    def cost(self, text: str) -> int:
        """Forward passes one explanation of `text` takes at most (the budget's unit, priced
        before running): never more than `passes` for hierarchical and kernel-shap."""
        words = len(word_spans(text)) + 1
        if self.method == "shapley":
            return words * self.samples
        if self.method == "ablation":
            return words
        return min(words, self.passes)

    def groups(self, n: int) -> int:
        """hierarchical: level-1 groups for n words (a third of the passes; the rest refine)."""
        return max(3, min(n, self.passes // 3))

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
        out = []
        for i in range(0, len(masks), self.batch):
            m = masks[i : i + self.batch]
            out.append(self.predictor.masked_logits(ids[: len(m)], m))
        return np.concatenate(out).astype(np.float64)

    def explain(self, text: str, target: str | None = None) -> TextExplanation:
        import torch

        labels = list(self.predictor.settings.export.labels)
        row, owners, truncated = self._tokens(text)
        spans = word_spans(text)
        seen = sorted({w for w in owners if w >= 0})
        n = len(seen)
        ids = np.tile(np.asarray(row, dtype=np.int64), (self.batch, 1))
        base_mask = np.ones(len(row), dtype=np.int64)
        # position → column of the word-presence vector (-1: always present)
        column = {w: j for j, w in enumerate(seen)}
        cols = np.array([column.get(w, -1) for w in owners])
        word_pos = cols >= 0
        base_logits = self._logits(ids[:1], base_mask[None])
        evaluations = 1

        def forward(present: torch.Tensor) -> torch.Tensor:
            # The unperturbed text is run once (above): Captum asks for it again at each level.
            nonlocal evaluations
            x = present.detach().numpy() > 0.5
            logits = np.repeat(base_logits, len(x), axis=0)
            todo = np.flatnonzero(~x.all(axis=1))
            if len(todo):
                masks = np.tile(base_mask, (len(todo), 1))
                masks[:, word_pos] = x[todo][:, cols[word_pos]].astype(np.int64)
                logits[todo] = self._logits(ids, masks)
                evaluations += len(todo)
            return torch.from_numpy(_scores(logits, self.score))

        probabilities = _scores(base_logits, "probability")[0]
        idx = labels.index(target) if target is not None else int(np.argmax(probabilities))
        scores = self._attribute(forward, n, idx) if n else np.zeros(0)
        by_word = dict(zip(seen, scores, strict=True))
        words = tuple(
            WordAttribution(text[s:e], s, e, float(by_word.get(w, 0.0)))
            for w, (s, e) in enumerate(spans)
        )
        return TextExplanation(
            target=labels[idx],
            probability=float(probabilities[idx]),
            words=words,
            method=self.method,
            evaluations=evaluations,
            truncated=truncated,
            model=dict(self.predictor.model_info),
        )

    def _attribute(self, forward: Callable, n: int, idx: int) -> np.ndarray:
        """Per seen word, its attribution toward label `idx`; `forward` takes (P, n) presences."""
        import torch
        from captum.attr import FeatureAblation, KernelShap, ShapleyValueSampling

        present = torch.ones(1, n)
        if self.method == "shapley":
            attr = ShapleyValueSampling(forward).attribute(
                present,
                baselines=0.0,
                target=idx,
                n_samples=self.samples,
                perturbations_per_eval=self.batch,
            )
        elif self.method == "kernel-shap":
            attr = KernelShap(forward).attribute(
                present,
                baselines=0.0,
                target=idx,
                n_samples=self.passes - 1,
                perturbations_per_eval=self.batch,
            )
        elif self.method == "hierarchical" and n + 1 > self.passes:
            return self._hierarchical(forward, n, idx)
        else:
            attr = FeatureAblation(forward).attribute(
                present, baselines=0.0, target=idx, perturbations_per_eval=self.batch
            )
        return attr[0].double().numpy()

    def _hierarchical(self, forward: Callable, n: int, idx: int) -> np.ndarray:
        """Level 1: leave each group of contiguous words out; level 2: leave each word of the
        most moving groups out alone, within `passes` (1 unperturbed + groups + refined words)."""
        import torch
        from captum.attr import FeatureAblation

        size = -(-n // self.groups(n))
        group = np.arange(n) // size
        level1 = (
            FeatureAblation(forward)
            .attribute(
                torch.ones(1, n),
                baselines=0.0,
                target=idx,
                feature_mask=torch.from_numpy(group)[None],
                perturbations_per_eval=self.batch,
            )[0]
            .double()
            .numpy()
        )
        count = np.bincount(group)
        group_attr = level1[np.searchsorted(group, np.arange(len(count)))]
        scores = level1 / count[group]
        left = self.passes - 1 - len(count)
        refined: list[int] = []
        for g in np.argsort(-np.abs(group_attr), kind="stable"):
            if count[g] <= left:
                refined.extend(np.flatnonzero(group == g).tolist())
                left -= int(count[g])
        if not refined:
            return scores
        words = np.asarray(sorted(refined))

        def within(present: torch.Tensor) -> torch.Tensor:
            full = torch.ones(len(present), n, dtype=present.dtype)
            full[:, torch.from_numpy(words)] = present
            return forward(full)

        level2 = (
            FeatureAblation(within)
            .attribute(
                torch.ones(1, len(words)),
                baselines=0.0,
                target=idx,
                perturbations_per_eval=self.batch,
            )[0]
            .double()
            .numpy()
        )
        scores[words] = level2
        return scores


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
