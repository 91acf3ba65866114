"""The sentiment model's settings: the text kit's (handlers/kits/text/settings.py) and the runtimes
its export offers; the export block is the kit's (`TextExport`, which training writes)."""

from __future__ import annotations

from typing import Literal

from handlers.kits.text.settings import TextSettings


class SentimentSettings(TextSettings):
    """The model-config's `handler:` block (handlers/sentiment/model-config.yaml): the kit's knobs,
    and the runtimes of its export (training/sentiment/quantize.py gates an int8 one)."""

    runtime: Literal["auto", "onnx", "onnx-int8", "torchscript"] = "auto"  # type: ignore[assignment]
    """auto (the gated int8 export on a CPU, fp32 ONNX on an accelerator or where the gate refused
    int8: handlers/runtime.resolve_runtime), onnx, onnx-int8 (the export's gated model.int8.onnx;
    each text runs alone, so its answer never depends on its batch) or torchscript."""


def parse_settings(manifest: dict, config: dict | None) -> SentimentSettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    return SentimentSettings.load(manifest, config, "sentiment")
