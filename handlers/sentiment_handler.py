"""TorchServe entry point for the sentiment model: the adapter (handlers/base.py) over its spec
(handlers/sentiment/__init__.py)."""

from handlers.base import ModelHandler
from handlers.sentiment import SPEC


class SentimentHandler(ModelHandler):
    spec = SPEC
