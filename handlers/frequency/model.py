"""The frequency model's part of the lifecycle: the signal kit's whole (handlers/kits/signal/
model.py: decoding, budgets, one-shot windows and stream chunks, block attributions) with the
lock-in predictor."""

from __future__ import annotations

from handlers.frequency.predict import FrequencyPredictor
from handlers.kits.signal.model import SignalModel


class FrequencyModel(SignalModel):
    predictor_class = FrequencyPredictor
