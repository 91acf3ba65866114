"""TorchServe entry point for the sentiment model: the adapter (handlers/base.py) over its `Model`
(handlers/sentiment/model.py)."""

from handlers.base import ModelHandler
from handlers.sentiment.model import SentimentModel


class SentimentHandler(ModelHandler):
    model = "sentiment"
    model_class = SentimentModel
