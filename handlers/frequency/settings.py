"""Typed settings of the frequency handler, parsed once at load from the archive.

Two sources: the manifest's `handler` block (what the export is: window, frequencies, graph names)
and model-config.yaml's `handler:` block (serving knobs). A bad value fails the load, never a request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from handlers.errors import ArchiveError
from handlers.manifest import handler_block, positive_int, reject_unknown, require
from handlers.runtime import RUNTIME_FILES


@dataclass(frozen=True)
class GraphSpec:
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    filename: str | None = None
    """None: the runtime's default file (model.onnx / model.pt)."""


SERVING_KEYS = frozenset({"runtime", "threads", "hop", "max_samples", "mc_samples", "seed"})
"""The knobs model-config.yaml's `handler:` block may set (the same names as sentiment's)."""


@dataclass(frozen=True)
class FrequencySettings:
    runtime: str
    """onnx or torchscript: which exported files the handler runs."""
    window: int
    """Samples per window; the length the sequence graph was trained on."""
    hop: int
    """Samples between window starts; hop < window gives the overlap the taper blends."""
    sample_rate: int
    """The only sample rate served (the model learnt frequencies in samples, not seconds)."""
    frequencies: tuple[float, ...]
    """Extractable frequencies, Hz, in the order of the one-hot selector."""
    max_samples: int
    """Longest signal (or stream chunk) accepted, samples."""
    mc_samples: int
    """MC-dropout samples of the head for the std band."""
    seed: int
    """Seed of the fixed dropout masks: answers do not depend on batching."""
    layers: int
    hidden: int
    sequence: GraphSpec
    step: GraphSpec
    head_file: str
    threads: int | None = None
    """Intra-op threads of the runtime (None: library default)."""

    @classmethod
    def from_sources(cls, serving: dict | None, export: dict) -> FrequencySettings:
        """The old argument order, kept for bench/inprocess.py; use `parse_settings`."""
        return parse_settings({"handler": export}, serving)


def _graph(block: dict, name: str, runtime: str | None = None) -> GraphSpec:
    where = f"manifest handler.{name}"
    graph = require(block, name, "manifest handler block")
    if not isinstance(graph, dict):
        raise ArchiveError(f"{where} must be an object")
    filename = None
    if runtime is not None:
        files = require(graph, "files", where)
        filename = str(require(files, runtime, f"{where}.files"))
    return GraphSpec(
        tuple(require(graph, "inputs", where)), tuple(require(graph, "outputs", where)), filename
    )


def _int(value: Any, name: str, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ArchiveError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return value


def parse_settings(manifest: dict, config: dict | None) -> FrequencySettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    export = handler_block(manifest)
    serving = dict(config or {})
    # e.g. stream_idle_s from before streams moved to the client, or the old name mc_seed
    reject_unknown(serving, SERVING_KEYS, "frequency")
    where = "manifest handler block"
    runtime = str(serving.get("runtime", "onnx"))
    if runtime not in RUNTIME_FILES:
        raise ArchiveError(f"runtime must be onnx or torchscript, not {runtime!r}")
    window = positive_int(require(export, "window", where), "manifest window")
    hop = positive_int(serving.get("hop") or window // 2, "handler.hop")
    if not hop <= window:
        raise ArchiveError(f"hop must be in (0, window={window}], not {hop}")
    frequencies = require(export, "frequencies", where)
    if not isinstance(frequencies, list) or not frequencies:
        raise ArchiveError(f"manifest frequencies must be a non-empty list, not {frequencies!r}")
    threads = serving.get("threads")
    settings = FrequencySettings(
        runtime=runtime,
        window=window,
        hop=hop,
        sample_rate=positive_int(require(export, "sample_rate", where), "manifest sample_rate"),
        frequencies=tuple(float(f) for f in frequencies),
        max_samples=positive_int(serving.get("max_samples", 20000), "handler.max_samples"),
        mc_samples=_int(serving.get("mc_samples", 32), "handler.mc_samples", 2),
        seed=_int(serving.get("seed", 0), "handler.seed"),
        layers=positive_int(require(export, "layers", where), "manifest layers"),
        hidden=positive_int(require(export, "hidden", where), "manifest hidden"),
        sequence=_graph(export, "sequence"),
        step=_graph(export, "step", runtime),
        head_file=str(export.get("head", "head.npz")),
        threads=positive_int(threads, "handler.threads") if threads else None,
    )
    return settings
