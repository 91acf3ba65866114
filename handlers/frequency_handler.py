"""TorchServe entry point for the frequency-extraction LSTM: the adapter (handlers/base.py) over
its `Model` (handlers/frequency/model.py)."""

from handlers.base import ModelHandler
from handlers.frequency.model import FrequencyModel


class FrequencyHandler(ModelHandler):
    model = "frequency"
    model_class = FrequencyModel
