"""The digits predictor: the image kit's classifier (handlers/kits/image/classifier.py) under the
digits name and settings."""

from __future__ import annotations

from handlers.digits.settings import DigitsSettings, parse_settings
from handlers.kits.image.classifier import ImagePredictor


class DigitsPredictor(ImagePredictor):
    model = "digits"
    parse_settings = staticmethod(parse_settings)
    settings: DigitsSettings
