"""The tabular model's settings: the tabular kit's (handlers/kits/tabular/settings.py), none of its
own; the export block is the kit's too (handlers/kits/tabular/settings.TabularExport, which
training writes)."""

from __future__ import annotations

from handlers.kits.tabular import settings as kit


class TabularSettings(kit.TabularSettings):
    """The model-config's `handler:` block (handlers/tabular/model-config.yaml): the kit's knobs."""


def parse_settings(manifest: dict, config: dict | None) -> TabularSettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    return TabularSettings.load(manifest, config, "tabular")
