"""TorchServe entry point for the frequency-extraction LSTM: the adapter (handlers/base.py) over its spec
(handlers/frequency/__init__.py)."""

from handlers.base import ModelHandler
from handlers.frequency import SPEC


class FrequencyHandler(ModelHandler):
    spec = SPEC
