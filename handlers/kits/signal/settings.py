"""The signal kit's settings, parsed once at load from the archive: the serving knobs every signal
model has (`SignalSettings`: limits, the cost model's budgets, windowing, explanations; with the
knobs every model has from handlers/settings.py), bound at load to the model's export, which names
at least a window, a sample rate and the frequencies served (`SignalExport`); and the exported
graphs' names and files by runtime (`ExportGraph`, `GraphSpec`). A bad value fails the load, never
a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, Self

from pydantic import Field

from handlers.errors import ArchiveError
from handlers.manifest import manifest_version, names, reject_unknown_export, require
from handlers.settings import PositiveInt, ServingSettings


class SignalExport(Protocol):
    """What the kit reads of a signal model's export (the manifest's `handler` block)."""

    @property
    def window(self) -> int: ...
    @property
    def sample_rate(self) -> int: ...
    @property
    def frequencies(self) -> tuple[float, ...]: ...


@dataclass(frozen=True)
class ExportGraph:
    """One exported graph in the manifest: its input and output names and, by runtime, its file."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    files: Mapping[str, str] | None = None
    """Runtime → file; None: the runtime's default file (model.onnx / model.pt)."""

    def to_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"inputs": list(self.inputs), "outputs": list(self.outputs)}
        if self.files is not None:
            block["files"] = dict(self.files)
        return block

    @classmethod
    def from_block(cls, block: dict, name: str, needs_files: bool, model: str) -> ExportGraph:
        where = f"manifest handler.{name}"
        graph = require(block, name, "manifest handler block")
        if not isinstance(graph, dict):
            raise ArchiveError(f"{where} must be an object")
        reject_unknown_export(graph, ("inputs", "outputs", "files"), f"{model} {name}")
        files = require(graph, "files", where) if needs_files else graph.get("files")
        if files is not None and (
            not isinstance(files, dict) or not all(isinstance(f, str) for f in files.values())
        ):
            raise ArchiveError(f"{where}.files must map runtimes to file names, not {files!r}")
        return cls(
            names(require(graph, "inputs", where), f"{where}.inputs"),
            names(require(graph, "outputs", where), f"{where}.outputs"),
            files,
        )


@dataclass(frozen=True)
class GraphSpec:
    """A graph as the runtime loads it: names, and the file for the served runtime."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    filename: str | None = None
    """None: the runtime's default file (model.onnx / model.pt)."""


def served_graph(graph: ExportGraph, name: str, runtime: str) -> GraphSpec:
    filename = None
    if graph.files is not None:
        if runtime not in graph.files:
            raise ArchiveError(f"manifest handler.{name}.files has no {runtime!r}")
        filename = graph.files[runtime]
    return GraphSpec(graph.inputs, graph.outputs, filename)


def frequencies(block: dict) -> tuple[float, ...]:
    """The manifest's `frequencies`: a non-empty list of numbers."""
    value = require(block, "frequencies", "manifest handler block")
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(f, int | float) and not isinstance(f, bool) for f in value)
    ):
        raise ArchiveError(
            f"manifest frequencies must be a non-empty list of numbers, not {value!r}"
        )
    return tuple(float(f) for f in value)


class SignalSettings(ServingSettings):
    """The model-config's `handler:` block of a signal model: the kit's knobs (the knobs every
    model has are handlers/settings.py's), bound at load to the export (`bound`). These defaults
    are the only ones; the model-config overrides them."""

    hop_setting: PositiveInt | None = Field(default=None, alias="hop")
    """hop: samples between window starts; None: window / 2 (Hann overlap-add). `hop` is the
    one served."""
    max_samples: PositiveInt = 20000
    """Longest signal (or stream chunk) accepted, samples."""
    max_batch_samples: PositiveInt = 100000
    """Work per batch, samples x requested frequencies: past it a request gets 503 + Retry-After."""
    explain_block: PositiveInt = 100
    """/explanations: samples occluded together (Captum Occlusion, stride half of it)."""
    max_explain_samples: PositiveInt = 400000
    """Cost limit of one explanation request, sample-passes (passes x signal samples): past it
    400 too_large before anything runs (2,000 samples x 4 frequencies take 320,000)."""
    max_batch_explain_samples: PositiveInt = 400000
    """Explanation work per batch, sample-passes: requests past it get 503 + Retry-After."""

    # What the export is, bound at load (`bound`): read as settings.<name> like the knobs.
    @property
    def export(self) -> Any:
        return self._export

    @property
    def window(self) -> int:
        return self.export.window

    @property
    def hop(self) -> int:
        """Samples between window starts; hop < window gives the overlap the taper blends."""
        return self.hop_setting or self.export.window // 2

    @property
    def sample_rate(self) -> int:
        return self.export.sample_rate

    @property
    def frequencies(self) -> tuple[float, ...]:
        return self.export.frequencies

    @classmethod
    def bound(cls, export: SignalExport, manifest: dict, config: dict | None, model: str) -> Self:
        """The `handler:` block parsed and bound to the export, or ArchiveError."""
        settings = cls.parse(config, model).bind(export, manifest_version(manifest))
        if not settings.hop <= export.window:
            raise ArchiveError(f"hop must be in (0, window={export.window}], not {settings.hop}")
        return settings
