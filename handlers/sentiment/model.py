"""The sentiment model's part of the lifecycle: the text kit's whole (handlers/kits/text/model.py:
texts checked and tokenized once, budgets in tokens and token-passes, one runtime pass per batch,
word or group attributions) with the sentiment predictor."""

from __future__ import annotations

from handlers.kits.text.codec import Classification
from handlers.kits.text.model import TextModel
from handlers.sentiment.predict import SentimentPredictor

__all__ = ["MODEL", "Classification", "SentimentModel"]


class SentimentModel(TextModel):
    predictor_class = SentimentPredictor


MODEL = SentimentModel
"""This model's entry in the registry (handlers/registry.py)."""
