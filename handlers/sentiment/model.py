"""The sentiment model's part of the lifecycle: the text kit's whole (handlers/kits/text/model.py:
texts checked and tokenized once, budgets in tokens and token-passes, one runtime pass per batch,
word or group attributions) with the sentiment predictor."""

from __future__ import annotations

from handlers.kits.text.model import TextModel
from handlers.sentiment.predict import SentimentPredictor


class SentimentModel(TextModel):
    predictor_class = SentimentPredictor
