"""The frequency predictor: the signal kit's (handlers/kits/signal/predict.py) with the lock-in
engine, its stream states and its out-of-distribution judge: the residual (handlers/frequency/
ood.py), the nonstationarity and the offset (handlers/frequency/stationarity.py), each against the
threshold training set for it. A one-shot input is judged on its own samples (the residual on
all of them, the others on its whole windows); a stream on everything it has seen, in whole
windows, so it is judged once it has seen one window (1,000 samples at 1 kHz) and its
nonstationarity once it has seen two."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from handlers.frequency import stationarity
from handlers.frequency.engine import FrequencyEngine
from handlers.frequency.ood import residual
from handlers.frequency.settings import FrequencySettings, parse_settings
from handlers.frequency.state import StateCodec, StreamState, load_key
from handlers.kits.signal.predict import Judgement, SignalPredictor


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
        window = stationarity.window_samples(s.sample_rate, s.frequencies)
        self.states = StateCodec(key, s.version, s.layers, s.hidden, len(s.frequencies), window)
        self._judged = (s.sample_rate, s.frequencies, s.ood_threshold,
                        s.nonstationarity_threshold, s.offset_threshold)  # fmt: skip
        """What `judge` reads of the settings, read once (each a property of the export)."""

    def judge(self, signal: np.ndarray, state: StreamState | None = None) -> Judgement:
        rate, freqs, ood, nonstationary, offset = self._judged
        if state is None:
            m = stationarity.measures(stationarity.of_signal(signal, rate, freqs), rate, freqs)
            res = residual(signal, rate, freqs)
            res = None if res is None else round(res, 6)
        else:
            stats = state.stats if state.stats is not None else stationarity.Stats.zero(len(freqs))
            m = stationarity.measures(stats, rate, freqs)
            res = m.residual
        return judgement(res, m.nonstationarity, m.offset, ood, nonstationary, offset)


def judgement(
    residual: float | None,
    nonstationarity: float | None,
    offset: float | None,
    residual_threshold: float | None,
    nonstationarity_threshold: float | None,
    offset_threshold: float | None,
) -> Judgement:
    """The figures and the flag: true when any figure is past its threshold, false when every
    judged figure with a threshold is within it, None when none is judged against one."""
    pairs = [
        (residual, residual_threshold),
        (nonstationarity, nonstationarity_threshold),
        (offset, offset_threshold),
    ]
    judged = [value > limit for value, limit in pairs if value is not None and limit is not None]
    flag = any(judged) if judged else None
    return Judgement(residual, flag, nonstationarity, offset)
