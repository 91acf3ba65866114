"""TorchServe entry point for the digits image classifier (the lifecycle is handlers/base.py).

Everything the model does lives in handlers/digits/predict.py (`DigitsPredictor`): this class only
wires it to the lifecycle. Nothing here names the network: a different architecture exported with
the same manifest block serves through it unchanged.
"""

from __future__ import annotations

import logging
from pathlib import Path

from handlers.base import ModelHandler
from handlers.codec import Reply
from handlers.digits.codec import ImageRequest
from handlers.digits.predict import DigitsAnswer, DigitsPredictor

log = logging.getLogger(__name__)


class DigitsHandler(ModelHandler):
    model = "digits"

    def load(self, model_dir: Path, config: dict, device: str, name: str) -> DigitsPredictor:
        predictor = DigitsPredictor.from_dir(model_dir, config, device=device, name=name)
        s = predictor.settings
        log.info(
            "digits %s ready: arch=%s input=%s %s runtime=%s",
            s.version, s.export.arch, list(s.export.input_shape), s.export.layout, s.runtime,
        )  # fmt: skip
        return predictor

    def parse(self, row: dict, headers: dict) -> ImageRequest:
        return self.predictor.decode(row, headers)

    def inference(self, parsed: list) -> list:
        return self.predictor.predict(parsed)

    def reply(self, answer: DigitsAnswer) -> Reply:
        return self.predictor.reply(answer)

    def report(self, answers: list[DigitsAnswer]) -> None:
        self.predictor.report(answers, self.telemetry)
