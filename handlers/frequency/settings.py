"""Typed settings of the frequency handler, parsed once at load from the archive.

Two sources: the manifest's `handler` block (what the export is: window, frequencies, graph names)
and model-config.yaml's `handler:` block (serving knobs). A bad value fails the load, never a request.
"""

from __future__ import annotations

from dataclasses import dataclass

from handlers.errors import ArchiveError


@dataclass(frozen=True)
class GraphSpec:
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    filename: str | None = None
    """None: the runtime's default file (model.onnx / model.pt)."""


SERVING_KEYS = frozenset({"runtime", "threads", "hop", "max_samples", "mc_samples", "mc_seed"})
"""The knobs model-config.yaml's `handler:` block may set."""


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
    mc_seed: int
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
        serving = serving or {}
        unknown = sorted(set(serving) - SERVING_KEYS)
        if unknown:
            # e.g. stream_idle_s from before streams moved to the client: say so, do not ignore it
            raise ArchiveError(f"unknown frequency handler settings: {', '.join(unknown)}")
        try:
            runtime = str(serving.get("runtime", "onnx"))
            window = int(export["window"])
            hop = int(serving.get("hop") or window // 2)
            step_files = export["step"]["files"]
            settings = cls(
                runtime=runtime,
                window=window,
                hop=hop,
                sample_rate=int(export["sample_rate"]),
                frequencies=tuple(float(f) for f in export["frequencies"]),
                max_samples=int(serving.get("max_samples", 20000)),
                mc_samples=int(serving.get("mc_samples", 32)),
                mc_seed=int(serving.get("mc_seed", 0)),
                layers=int(export["layers"]),
                hidden=int(export["hidden"]),
                sequence=GraphSpec(
                    tuple(export["sequence"]["inputs"]), tuple(export["sequence"]["outputs"])
                ),
                step=GraphSpec(
                    tuple(export["step"]["inputs"]),
                    tuple(export["step"]["outputs"]),
                    step_files[runtime],
                ),
                head_file=str(export.get("head", "head.npz")),
                threads=int(serving["threads"]) if serving.get("threads") else None,
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ArchiveError(f"frequency settings are incomplete or malformed: {e!r}") from e
        if runtime not in ("onnx", "torchscript"):
            raise ArchiveError(f"runtime must be onnx or torchscript, not {runtime!r}")
        if not 0 < hop <= window:
            raise ArchiveError(f"hop must be in (0, window={window}], not {hop}")
        if settings.max_samples < 1 or settings.mc_samples < 2:
            raise ArchiveError("max_samples >= 1 and mc_samples >= 2 are required")
        return settings
