"""The digits model's settings: the image kit's (handlers/kits/image/settings.py), none of its
own; the export block is the kit's too (`ImageExport`, which training writes)."""

from __future__ import annotations

from handlers.kits.image.settings import ImageSettings


class DigitsSettings(ImageSettings):
    """The model-config's `handler:` block (handlers/digits/model-config.yaml): the kit's knobs."""


def parse_settings(manifest: dict, config: dict | None) -> DigitsSettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    return DigitsSettings.load(manifest, config, "digits")
