"""Typed settings of the frequency handler, parsed once at load from the archive: the signal kit's
knobs (handlers/kits/signal/settings.py) and what the lock-in export is (`FrequencyExport`, the
manifest's `handler` block, which training writes). A bad value fails the load, never a request.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from handlers.errors import ArchiveError
from handlers.kits.signal.settings import (
    ExportGraph,
    GraphSpec,
    SignalSettings,
    frequencies,
    served_graph,
)
from handlers.manifest import handler_block, positive_int, reject_unknown_export, require, text


@dataclass(frozen=True)
class BandScale:
    """The served band's factors: for each mode ("windows", "stream"), one factor per `step`
    samples of a sample's index since its request or stream began, the last holding on (a
    stream's band must widen while it has read little: the first half second)."""

    step: int
    windows: tuple[float, ...]
    stream: tuple[float, ...]

    def factors(self, mode: str, start: int, n: int) -> np.ndarray:
        """(n,) factors of the samples start .. start + n - 1 of `mode`."""
        table = np.asarray(self.windows if mode == "windows" else self.stream, dtype=np.float64)
        index = (start + np.arange(n, dtype=np.int64)) // self.step
        return table[np.minimum(index, table.shape[0] - 1)]

    def to_block(self) -> dict[str, Any]:
        return {"step": self.step, "windows": list(self.windows), "stream": list(self.stream)}

    @classmethod
    def from_block(cls, value: Any) -> BandScale | None:
        if value is None:
            return None
        where = "manifest band_scale"
        if not isinstance(value, dict) or set(value) != {"step", "windows", "stream"}:
            raise ArchiveError(
                f"{where} must hold step, windows and stream, or be null, not {value!r}"
            )
        tables = {}
        for mode in ("windows", "stream"):
            t = value[mode]
            if (
                not isinstance(t, list)
                or not t
                or not all(
                    isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < math.inf
                    for v in t
                )
            ):
                raise ArchiveError(f"{where}.{mode} must be a list of positive numbers, not {t!r}")
            tables[mode] = tuple(float(v) for v in t)
        return cls(positive_int(value["step"], f"{where}.step"), **tables)


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
    nonstationarity_threshold: float | None = None
    """Nonstationarity (handlers/frequency/stationarity.py) past which an answer says
    out_of_distribution: set by training on held-out served-family signals of their own seed.
    None (an export from before): the figure is given, it does not flag."""
    offset_threshold: float | None = None
    """Offset share past which an answer says out_of_distribution (set as the one above)."""
    band_scale: BandScale | None = None
    """The factors the exact dropout std is multiplied by before it is served, by mode and by the
    sample's index since the request or stream began: fitted by training on held-out
    served-family signals so that +-2 std holds its nominal share of the true samples
    (training/frequency/quality.py). None (an export from before): 1."""

    def to_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        block["frequencies"] = list(self.frequencies)
        for key in ("sequence", "step", "band_scale"):
            if block[key] is not None:
                block[key] = block[key].to_block()
        return block

    @classmethod
    def from_block(cls, block: dict) -> FrequencyExport:
        """Parse and check the manifest block; a missing, unknown or bad key raises ArchiveError
        naming it."""
        reject_unknown_export(block, (f.name for f in fields(cls)), "frequency")
        where = "manifest handler block"
        served = frequencies(block)
        return cls(
            window=positive_int(require(block, "window", where), "manifest window"),
            block=positive_int(require(block, "block", where), "manifest block"),
            sample_rate=positive_int(require(block, "sample_rate", where), "manifest sample_rate"),
            frequencies=served,
            hidden=positive_int(require(block, "hidden", where), "manifest hidden"),
            layers=positive_int(require(block, "layers", where), "manifest layers"),
            sequence=ExportGraph.from_block(
                block, "sequence", needs_files=False, model="frequency"
            ),
            step=ExportGraph.from_block(block, "step", needs_files=True, model="frequency"),
            head=text(block.get("head", cls.head), "manifest head"),
            ood_threshold=_fraction(block.get("ood_threshold"), "manifest ood_threshold"),
            nonstationarity_threshold=_fraction(
                block.get("nonstationarity_threshold"), "manifest nonstationarity_threshold"
            ),
            offset_threshold=_fraction(block.get("offset_threshold"), "manifest offset_threshold"),
            band_scale=BandScale.from_block(block.get("band_scale")),
        )


def _fraction(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= 1:
        raise ArchiveError(f"{name} must be a number in (0, 1] or null, not {value!r}")
    return float(value)


class FrequencySettings(SignalSettings):
    """The model-config's `handler:` block: the signal kit's knobs and the lock-in export's."""

    mc_samples: Annotated[int, Field(ge=2)] = 32
    """MC-dropout samples for a head with hidden layers; a one-layer linear head (the exported
    one) has its dropout std computed exactly and samples nothing."""

    @property
    def export(self) -> FrequencyExport:
        return self._export

    @property
    def block(self) -> int:
        """Samples per LSTM step."""
        return self.export.block

    @property
    def layers(self) -> int:
        return self.export.layers

    @property
    def hidden(self) -> int:
        return self.export.hidden

    @property
    def sequence(self) -> GraphSpec:
        return served_graph(self.export.sequence, "sequence", self.runtime)

    @property
    def step(self) -> GraphSpec:
        return served_graph(self.export.step, "step", self.runtime)

    @property
    def head_file(self) -> str:
        return self.export.head

    @property
    def ood_threshold(self) -> float | None:
        """Residual past which an answer is out of distribution (None: the flag is null)."""
        return self.export.ood_threshold

    @property
    def nonstationarity_threshold(self) -> float | None:
        return self.export.nonstationarity_threshold

    @property
    def offset_threshold(self) -> float | None:
        return self.export.offset_threshold

    def band_factors(self, mode: str, start: int, n: int) -> np.ndarray:
        """(n,) factors of the served std band (FrequencyExport.band_scale; 1 without one)."""
        scale = self.export.band_scale
        return np.ones(n) if scale is None else scale.factors(mode, start, n)


def parse_settings(manifest: dict, config: dict | None) -> FrequencySettings:
    """manifest.json contents + the model-config's `handler:` block → settings, or ArchiveError."""
    export = FrequencyExport.from_block(handler_block(manifest))
    settings = FrequencySettings.bound(export, manifest, config, "frequency")
    if export.window % export.block:
        raise ArchiveError(
            f"manifest window {export.window} is not a multiple of its block {export.block}"
        )
    settings.sequence, settings.step  # noqa: B018  (a runtime with no file in the export fails here)
    return settings
