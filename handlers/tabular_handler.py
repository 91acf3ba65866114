"""TorchServe entry point for the tabular classifier: the adapter (handlers/base.py) over its spec
(handlers/tabular/__init__.py)."""

from handlers.base import ModelHandler
from handlers.tabular import SPEC


class TabularHandler(ModelHandler):
    spec = SPEC
