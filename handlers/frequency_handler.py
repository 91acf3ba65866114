"""TorchServe entry point for the frequency-extraction LSTM (the lifecycle is handlers/base.py).

inference hands the batch to the predictor (one-shot windows and stream chunks, each chunk
continuing the state its client sent: the worker keeps nothing); answers are JSON or float32.
"""

from __future__ import annotations

import logging
from pathlib import Path

from handlers.base import ModelHandler
from handlers.budget import within_budget
from handlers.codec import Reply
from handlers.frequency.codec import SignalRequest, decode_request
from handlers.frequency.predict import Extraction, FrequencyPredictor

log = logging.getLogger(__name__)


class FrequencyHandler(ModelHandler):
    model = "frequency"

    def load(self, model_dir: Path, config: dict, device: str, name: str) -> FrequencyPredictor:
        predictor = FrequencyPredictor.from_dir(model_dir, config, device=device, name=name)
        log.info(
            "frequency %s ready: runtime=%s", predictor.settings.version, predictor.settings.runtime
        )
        return predictor

    def parse(self, row: dict, headers: dict) -> SignalRequest:
        return decode_request(row, headers, self.settings)

    def inference(self, items: list) -> list:
        # Work per batch is bounded like sentiment's tokens: samples x frequencies, in arrival order.
        costs = [
            r.signal.shape[0] * len(r.selectors) if isinstance(r, SignalRequest) else None
            for r in items
        ]
        admitted = within_budget(
            items, costs, self.settings.max_batch_samples, "samples x frequencies"
        )
        return self.predictor.predict(admitted)

    def reply(self, answer: Extraction) -> Reply:
        return self.predictor.reply(answer)

    def report(self, answers: list[Extraction]) -> None:
        for answer in answers:
            self.telemetry.extractions(answer.frequencies, answer.components.std)
        self.telemetry.windows(a.windows for a in answers if a.windows)
