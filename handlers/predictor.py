"""What every model's predictor shares: one constructor shape and one way to load from a directory.

A predictor is built from (model_dir, settings, device, name); `from_dir` reads manifest.json there
and parses it with the model's `parse_settings(manifest, config)`, where `config` is the
model-config's `handler:` block. The settings carry the artifact version, reported in every answer.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from handlers.manifest import read_manifest

log = logging.getLogger(__name__)


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


PredictorT = TypeVar("PredictorT", bound=Predictor)


class PredictorModel(Generic[PredictorT]):
    """A model of the lifecycle (handlers/service.Model) built around one predictor: the kits'
    models (handlers/kits/<kit>/model.py) take their load and constructor from here, and a model of
    a kit names only its `predictor_class`."""

    reads_parts: ClassVar[bool] = False
    predictor_class: ClassVar[type[Predictor]]
    """The model's own predictor: its name and settings parser (handlers/<model>/predict.py)."""

    def __init__(self, predictor: PredictorT):
        self.predictor = predictor
        self.name: str = predictor.name
        self.settings = predictor.settings

    @classmethod
    def load(
        cls, model_dir: Path, config: dict, device: str = "cpu", name: str = "", **options: Any
    ) -> Self:
        """`options`: the predictor's own constructor arguments (e.g. a signal model's state key)."""
        predictor: Any = cls.predictor_class.from_dir(
            model_dir, config, device=device, name=name or None, **options
        )
        log.info(
            "%s %s ready: %s", predictor.name, predictor.settings.version, cls.describe(predictor)
        )
        return cls(predictor)

    @staticmethod
    def describe(predictor: PredictorT) -> str:
        """What the load's log line says of the served model beyond its name and version."""
        return f"runtime={predictor.settings.runtime}"
