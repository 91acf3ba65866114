"""TorchServe entry point for the tabular classifier: the adapter (handlers/base.py) over its
`Model` (handlers/tabular/model.py)."""

from handlers.base import ModelHandler
from handlers.tabular.model import TabularModel


class TabularHandler(ModelHandler):
    model = "tabular"
    model_class = TabularModel
