"""TorchServe entry point for the digits image classifier: the adapter (handlers/base.py) over its spec
(handlers/digits/__init__.py)."""

from handlers.base import ModelHandler
from handlers.digits import SPEC


class DigitsHandler(ModelHandler):
    spec = SPEC
