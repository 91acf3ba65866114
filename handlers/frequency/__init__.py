"""The frequency-extraction LSTM's serving code: the signal kit (handlers/kits/signal/) with its
settings, windowing, engine (runtime calls and the std band), the client-carried stream state and
the out-of-distribution judge. `SPEC` is its one hook (handlers/spec.py)."""

from handlers.frequency.model import FrequencyModel
from handlers.frequency.settings import FrequencySettings
from handlers.kits import signal
from handlers.kits.signal import oip
from handlers.spec import ModelSpec

SPEC = ModelSpec(
    "frequency", model=FrequencyModel, settings=FrequencySettings, kit=signal, contract=oip
)
