"""digits' explanations: the image kit's pixel attributions (handlers/kits/image/explain.py), by
the names training's faithfulness check imports."""

from handlers.kits.image.explain import METHODS
from handlers.kits.image.explain import PixelExplainer as DigitsExplainer

__all__ = ["METHODS", "DigitsExplainer"]
