"""digits' tensor contract: the image kit's (handlers/kits/image/oip.py)."""

from handlers.kits.image.oip import answer, inputs, native, outputs

__all__ = ["answer", "inputs", "native", "outputs"]
