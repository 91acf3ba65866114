"""Typed settings of the frequency handler, parsed once at load from the archive.

Two sources: the manifest's `handler` block (what the export is: window, frequencies, graph names;
`FrequencyExport`, which training writes) and model-config.yaml's `handler:` block (serving knobs).
A bad value fails the load, never a request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal

from pydantic import Field

from handlers.errors import ArchiveError
from handlers.manifest import (
    handler_block,
    manifest_version,
    names,
    positive_int,
    reject_unknown_export,
    require,
    text,
)
from handlers.settings import NonNegativeInt, PositiveInt, ServingSettings


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
    def from_block(cls, block: dict, name: str, needs_files: bool) -> ExportGraph:
        where = f"manifest handler.{name}"
        graph = require(block, name, "manifest handler block")
        if not isinstance(graph, dict):
            raise ArchiveError(f"{where} must be an object")
        reject_unknown_export(graph, ("inputs", "outputs", "files"), f"frequency {name}")
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
class FrequencyExport:
    """The manifest's `handler` block: what training exported. Training builds one and writes
    `to_block()`; serving reads it with `from_block`, so each key is named here and nowhere else."""

    window: int
    """Samples per window (a multiple of `block`); each is read forward and backward."""
    block: int
    """Samples per LSTM step: the lock-in products are averaged over blocks of this many
    (handlers/frequency/lockin.py)."""
    sample_rate: int
    """The only sample rate served (the model learnt frequencies in samples, not seconds)."""
    frequencies: tuple[float, ...]
    """Extractable frequencies, Hz, in the order of the one-hot selector."""
    hidden: int
    """LSTM hidden size: the shape of a stream's state."""
    layers: int
    """LSTM layers: the shape of a stream's state."""
    sequence: ExportGraph
    """The one-shot graph over whole windows (model.onnx / model.pt)."""
    step: ExportGraph
    """The stateful graph a stream chunk runs through; its files are named by runtime."""
    head: str = "head.npz"
    """The stochastic head's weights, relative to the artifact directory."""
    ood_threshold: float | None = None
    """Residual (handlers/frequency/ood.py) past which an answer says out_of_distribution: set by
    training on held-out served-family signals. None (an export from before): the flag is null."""

    def to_block(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "block": self.block,
            "sample_rate": self.sample_rate,
            "frequencies": list(self.frequencies),
            "hidden": self.hidden,
            "layers": self.layers,
            "sequence": self.sequence.to_block(),
            "step": self.step.to_block(),
            "head": self.head,
            "ood_threshold": self.ood_threshold,
        }

    @classmethod
    def from_block(cls, block: dict) -> FrequencyExport:
        """Parse and check the manifest block; a missing, unknown or bad key raises ArchiveError
        naming it."""
        reject_unknown_export(block, (f.name for f in fields(cls)), "frequency")
        where = "manifest handler block"
        frequencies = require(block, "frequencies", where)
        if (
            not isinstance(frequencies, list)
            or not frequencies
            or not all(isinstance(f, int | float) and not isinstance(f, bool) for f in frequencies)
        ):
            raise ArchiveError(
                f"manifest frequencies must be a non-empty list of numbers, not {frequencies!r}"
            )
        return cls(
            window=positive_int(require(block, "window", where), "manifest window"),
            block=positive_int(require(block, "block", where), "manifest block"),
            sample_rate=positive_int(require(block, "sample_rate", where), "manifest sample_rate"),
            frequencies=tuple(float(f) for f in frequencies),
            hidden=positive_int(require(block, "hidden", where), "manifest hidden"),
            layers=positive_int(require(block, "layers", where), "manifest layers"),
            sequence=ExportGraph.from_block(block, "sequence", needs_files=False),
            step=ExportGraph.from_block(block, "step", needs_files=True),
            head=text(block.get("head", cls.head), "manifest head"),
            ood_threshold=_fraction(block.get("ood_threshold"), "manifest ood_threshold"),
        )


def _fraction(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ArchiveError(f"{name} must be a number in (0, 1] or null, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class GraphSpec:
    """A graph as the runtime loads it: names, and the file for the served runtime."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    filename: str | None = None
    """None: the runtime's default file (model.onnx / model.pt)."""


def _served(graph: ExportGraph, name: str, runtime: str) -> GraphSpec:
    filename = None
    if graph.files is not None:
        if runtime not in graph.files:
            raise ArchiveError(f"manifest handler.{name}.files has no {runtime!r}")
        filename = graph.files[runtime]
    return GraphSpec(graph.inputs, graph.outputs, filename)


class FrequencyServing(ServingSettings):
    """The model-config's `handler:` block: how to serve the export (the same names as
    sentiment's). These defaults are the only ones; the model-config overrides them."""

    runtime: Literal["onnx", "torchscript"] = "onnx"
    """onnx or torchscript: which exported files the handler runs."""
    threads: PositiveInt | None = None
    """Intra-op threads of the runtime (None: library default)."""
    intra_op_spinning: bool = False
    """ONNX Runtime intra-op threads busy-wait between ops when true (ORT's own default). Off:
    on shared cores the spinning threads compete with TorchServe's frontend."""
    hop: PositiveInt | None = None
    """Samples between window starts; None: window / 2 (Hann overlap-add)."""
    max_samples: PositiveInt = 20000
    """Longest signal (or stream chunk) accepted, samples."""
    max_batch_samples: PositiveInt = 100000
    """Work per batch, samples x requested frequencies: past it a request gets 503 + Retry-After."""
    mc_samples: Annotated[int, Field(ge=2)] = 32
    """MC-dropout samples for a head with hidden layers; a one-layer linear head (the exported
    one) has its dropout std computed exactly and samples nothing."""
    seed: NonNegativeInt = 0
    """Seed of the fixed dropout masks: answers do not depend on batching."""
    explain_block: PositiveInt = 100
    """/explanations: samples occluded together (Captum Occlusion, stride half of it)."""
    max_explain_samples: PositiveInt = 400000
    """Cost limit of one explanation request, sample-passes (passes x signal samples): past it
    400 too_large before anything runs (2,000 samples x 4 frequencies take 320,000)."""
    max_batch_explain_samples: PositiveInt = 400000
    """Explanation work per batch, sample-passes: requests past it get 503 + Retry-After."""


SERVING_KEYS = frozenset(FrequencyServing.model_fields)
"""The knobs model-config.yaml's `handler:` block may set."""


@dataclass(frozen=True)
class FrequencySettings:
    """What the predictor runs with: the export (`FrequencyExport`) plus the serving knobs."""

    runtime: str
    """onnx or torchscript: which exported files the handler runs."""
    window: int
    hop: int
    """Samples between window starts; hop < window gives the overlap the taper blends."""
    block: int
    """Samples per LSTM step."""
    sample_rate: int
    frequencies: tuple[float, ...]
    max_samples: int
    """Longest signal (or stream chunk) accepted, samples."""
    max_batch_samples: int
    """Work per batch, samples x requested frequencies: past it a request gets 503 + Retry-After."""
    mc_samples: int
    """MC-dropout samples for a head with hidden layers (a linear head's band is exact)."""
    seed: int
    """Seed of the fixed dropout masks: answers do not depend on batching."""
    layers: int
    hidden: int
    sequence: GraphSpec
    step: GraphSpec
    head_file: str
    version: str
    """The artifact version from the manifest, reported in every response; stream states are
    bound to it."""
    threads: int | None = None
    """Intra-op threads of the runtime (None: library default)."""
    ood_threshold: float | None = None
    """Residual past which an answer is out of distribution (None: the flag is null)."""
    serving: FrequencyServing = field(default_factory=FrequencyServing)
    """All the model-config's knobs as given (the explanation limits are read from here)."""


def parse_settings(manifest: dict, config: dict | None) -> FrequencySettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    export = FrequencyExport.from_block(handler_block(manifest))
    # e.g. stream_idle_s from before streams moved to the client, or the old name mc_seed
    serving = FrequencyServing.parse(config, "frequency")
    hop = serving.hop or export.window // 2
    if not hop <= export.window:
        raise ArchiveError(f"hop must be in (0, window={export.window}], not {hop}")
    if export.window % export.block:
        raise ArchiveError(
            f"manifest window {export.window} is not a multiple of its block {export.block}"
        )
    return FrequencySettings(
        runtime=serving.runtime,
        window=export.window,
        hop=hop,
        block=export.block,
        sample_rate=export.sample_rate,
        frequencies=export.frequencies,
        max_samples=serving.max_samples,
        max_batch_samples=serving.max_batch_samples,
        mc_samples=serving.mc_samples,
        seed=serving.seed,
        layers=export.layers,
        hidden=export.hidden,
        sequence=_served(export.sequence, "sequence", serving.runtime),
        step=_served(export.step, "step", serving.runtime),
        head_file=export.head,
        version=manifest_version(manifest),
        threads=serving.threads,
        ood_threshold=export.ood_threshold,
        serving=serving,
    )
