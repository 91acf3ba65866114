"""What every model's predictor shares: one constructor shape and one way to load from a directory.

A predictor is built from (model_dir, settings, device, name); `from_dir` reads manifest.json there
and parses it with the model's `parse_settings(manifest, config)`, where `config` is the
model-config's `handler:` block. The settings carry the artifact version, reported in every answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from handlers.manifest import read_manifest


class ModelSettings(Protocol):
    @property
    def version(self) -> str: ...


SettingsT = TypeVar("SettingsT", bound=ModelSettings)


class Predictor(Generic[SettingsT]):
    model: ClassVar[str]
    """The default model name (TorchServe's registered name wins)."""
    parse_settings: ClassVar[staticmethod[[dict, dict | None], Any]]
    """The model's `parse_settings(manifest, config)`."""

    def __init__(
        self,
        model_dir: str | Path,
        settings: SettingsT,
        device: str = "cpu",
        name: str | None = None,
    ):
        self.settings = settings
        self.name = name or self.model
        self.model_info = {"name": self.name, "version": settings.version}
        """The `model` block of every answer."""

    @classmethod
    def from_dir(
        cls,
        model_dir: str | Path,
        config: dict | None = None,
        device: str = "cpu",
        name: str | None = None,
        **options: Any,
    ) -> Self:
        """Load from a directory holding manifest.json and the exported files (artifact dir or
        unpacked archive); `options` are the model's own constructor arguments."""
        settings = cls.parse_settings(read_manifest(model_dir), config)
        return cls(model_dir, settings, device, name, **options)
