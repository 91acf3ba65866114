"""The tabular model's part of the lifecycle: the tabular kit's whole (handlers/kits/tabular/model.py:
records checked and priced, one runtime call per batch, per-feature attributions) under the tabular
name and settings."""

from __future__ import annotations

from handlers.kits.tabular import model as kit
from handlers.tabular.settings import parse_settings


class TabularModel(kit.TabularModel):
    model = "tabular"
    parse_settings = staticmethod(parse_settings)
