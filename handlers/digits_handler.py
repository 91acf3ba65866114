"""TorchServe entry point for the digits image classifier: the adapter (handlers/base.py) over its
`Model` (handlers/digits/model.py)."""

from handlers.base import ModelHandler
from handlers.digits.model import DigitsModel


class DigitsHandler(ModelHandler):
    model = "digits"
    model_class = DigitsModel
