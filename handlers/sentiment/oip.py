"""sentiment's tensor contract: the text kit's (handlers/kits/text/oip.py)."""

from handlers.kits.text.oip import answer, inputs, native, outputs

__all__ = ["answer", "inputs", "native", "outputs"]
