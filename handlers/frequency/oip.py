"""frequency's tensor contract: the signal kit's (handlers/kits/signal/oip.py)."""

from handlers.kits.signal.oip import answer, inputs, native, outputs

__all__ = ["answer", "inputs", "native", "outputs"]
