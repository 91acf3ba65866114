"""The pixel reading digits trains with and is served with: the image kit's
(handlers/kits/image/reading.py), by the names training imports."""

from handlers.kits.image.reading import model_batch, resize

__all__ = ["model_batch", "resize"]
