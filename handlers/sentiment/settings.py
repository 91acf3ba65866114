"""The sentiment model's settings: the text kit's (handlers/kits/text/settings.py), none of its
own; the export block is the kit's too (`SentimentExport`, which training writes)."""

from __future__ import annotations

from handlers.kits.text.settings import HEAD_TAIL, TextExport, TextSettings

__all__ = ["HEAD_TAIL", "SERVING_KEYS", "SentimentExport", "SentimentSettings", "parse_settings"]

SentimentExport = TextExport


class SentimentSettings(TextSettings):
    """The model-config's `handler:` block (handlers/sentiment/model-config.yaml): the kit's."""


SERVING_KEYS = frozenset(SentimentSettings.model_fields)
"""The knobs model-config.yaml's `handler:` block may set."""


def parse_settings(manifest: dict, config: dict | None) -> SentimentSettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    return SentimentSettings.load(manifest, config, "sentiment")
