"""The frequency predictor: the signal kit's (handlers/kits/signal/predict.py) with the lock-in
engine, its stream states and its out-of-distribution judge."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.ood import judge
from handlers.frequency.settings import FrequencySettings, parse_settings
from handlers.frequency.state import StateCodec, load_key
from handlers.kits.signal.predict import Extraction, SignalPredictor

__all__ = ["Extraction", "FrequencyPredictor"]


class FrequencyPredictor(SignalPredictor[FrequencySettings]):
    model = "frequency"
    parse_settings = staticmethod(parse_settings)

    def __init__(
        self,
        model_dir: str | Path,
        settings: FrequencySettings,
        device: str = "cpu",
        name: str | None = None,
        *,
        state_key: bytes | None = None,
    ):
        """`state_key` signs stream states; None reads the deployment's key file (load_key)."""
        super().__init__(model_dir, settings, device, name)
        s = settings
        self.engine = FrequencyEngine(s, model_dir, device)
        key = state_key if state_key is not None else load_key()
        self.states = StateCodec(key, s.version, s.layers, s.hidden, len(s.frequencies))

    def judge(self, signal: np.ndarray) -> tuple[float | None, bool | None]:
        s = self.settings
        return judge(signal, s.sample_rate, s.frequencies, s.ood_threshold)
