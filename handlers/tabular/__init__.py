"""The tabular classifier's serving code: the tabular kit (handlers/kits/tabular/) under its name,
with its tensor contract (oip.py). `SPEC` is its one hook (handlers/spec.py)."""

from handlers.kits import tabular
from handlers.spec import ModelSpec
from handlers.tabular import oip
from handlers.tabular.model import TabularModel
from handlers.tabular.settings import TabularSettings

SPEC = ModelSpec("tabular", model=TabularModel, settings=TabularSettings, kit=tabular, contract=oip)
