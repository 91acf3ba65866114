"""The digits model's part of the lifecycle: the image kit's whole (handlers/kits/image/model.py:
decoding, budgets, classification, pixel attributions) with the digits predictor."""

from __future__ import annotations

from handlers.digits.predict import DigitsPredictor
from handlers.kits.image.model import ImageModel


class DigitsModel(ImageModel):
    predictor_class = DigitsPredictor
