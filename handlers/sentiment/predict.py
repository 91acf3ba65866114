"""The sentiment predictor: the text kit's classifier (handlers/kits/text/classifier.py) under the
sentiment name and settings, its fp16 gate probed with reviews."""

from __future__ import annotations

from handlers.kits.text.classifier import SELF_CHECK_TEXTS, TextPredictor
from handlers.sentiment.settings import SentimentSettings, parse_settings

__all__ = ["FP16_PROBE_TEXTS", "SentimentPredictor"]

FP16_PROBE_TEXTS = [
    *SELF_CHECK_TEXTS,
    "An astonishing film: the cast is superb and the ending left the whole theatre in tears. " * 6,
    "Dull, overlong and badly acted; I checked my watch every ten minutes and regretted it. " * 6,
]


class SentimentPredictor(TextPredictor):
    model = "sentiment"
    parse_settings = staticmethod(parse_settings)
    settings: SentimentSettings
    fp16_probe_texts = FP16_PROBE_TEXTS
