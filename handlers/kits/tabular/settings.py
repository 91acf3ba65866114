"""The tabular kit's settings, parsed once at load from the archive: what a tabular classifier's
export is (`TabularExport`, the manifest's `handler` block, written by training: the graph's names,
the labels, the temperature and the feature schema) and the kit's serving knobs
(`TabularSettings`, model-config.yaml's `handler:` block, with the knobs every model has from
handlers/settings.py). A bad value fails the load, never a request."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Annotated, Any, Literal, Self

from pydantic import Field

from handlers.errors import ArchiveError
from handlers.kits.tabular.schema import Schema
from handlers.manifest import handler_block, manifest_version, names, require, text
from handlers.manifest import reject_unknown_export as reject_unknown
from handlers.settings import PositiveInt, ServingSettings


@dataclass(frozen=True)
class TabularExport:
    """The manifest's `handler` block: training writes `to_block()`, serving reads `from_block`."""

    input_name: str
    """The graph's input: (batch, schema width) encoded records (schema.py)."""
    output_name: str
    """The graph's logits output, (batch, classes)."""
    features_name: str
    """The graph's second output, (batch, D): what the dropout → linear head takes."""
    classes: tuple[str, ...]
    schema: Schema
    """The features training saw (names, types, ranges, categories, required or optional)."""
    temperature: float = 1.0
    """Calibration temperature fitted on the validation split: softmax(logits / T)."""
    head: str = "head.npz"
    """The dropout → linear head over `features_name`, sampled for MC-dropout uncertainty."""
    distance: str = "distance.npz"
    """The in-distribution score's fit (distance.py)."""
    ood_threshold: float = math.inf
    """Distance past which an answer is out_of_distribution (training sets it on validation)."""

    def to_block(self) -> dict[str, Any]:
        block = {f.name: getattr(self, f.name) for f in fields(self)}
        return block | {"classes": list(self.classes), "schema": self.schema.to_block()}

    @classmethod
    def from_block(cls, block: dict, model: str) -> TabularExport:
        reject_unknown(block, (f.name for f in fields(cls)), model)
        where = "manifest handler block"
        temperature, threshold = block.get("temperature", 1.0), block.get("ood_threshold")
        for k, v in (("temperature", temperature), ("ood_threshold", threshold)):
            if not isinstance(v, int | float) or not 0 < v < math.inf:
                raise ArchiveError(f"manifest {k} must be positive, not {v!r}")
        return cls(
            **{
                k: text(require(block, k, where), f"manifest {k}")
                for k in ("input_name", "output_name", "features_name")
            },
            classes=names(require(block, "classes", where), "manifest classes"),
            schema=Schema.from_block(require(block, "schema", where)),
            temperature=float(temperature),
            head=text(block.get("head", cls.head), "manifest head"),
            distance=text(block.get("distance", cls.distance), "manifest distance"),
            ood_threshold=float(block["ood_threshold"]),
        )


class TabularSettings(ServingSettings):
    """The model-config's `handler:` block (the kit's knobs; the shared ones are
    handlers/settings.py's), bound at load to the export and its version (`load`)."""

    max_records: PositiveInt = 256
    """Records per request (JSON {"records": [...]} or CSV rows): past it 400 too_large."""
    max_batch_records: PositiveInt = 1024
    """Work per batch, records: past it a request gets 503 + Retry-After (handlers/budget.py)."""
    self_check_atol: Annotated[float, Field(gt=0)] = 1e-3
    """At load, the head over the graph's features must reproduce the graph's logits within this."""
    explain_method: Literal["ablation", "shapley"] = "ablation"
    """Captum method of /explanations: leave-one-feature-out or Shapley sampling."""
    explain_samples: PositiveInt = 8
    """Shapley sampling only: permutations drawn (each costs one pass per feature)."""
    max_explain_passes: PositiveInt = 2048
    """Cost limit of one explanation request, record-passes: past it 400 too_large."""
    max_batch_explain_passes: PositiveInt = 4096
    """Explanation work per batch, record-passes: requests past it get 503 + Retry-After."""

    @property
    def export(self) -> TabularExport:
        return self._export

    @classmethod
    def load(cls, manifest: dict, config: dict | None, model: str) -> Self:
        """manifest.json contents + the model-config's `handler:` block → settings, or
        ArchiveError naming what is wrong."""
        export = TabularExport.from_block(handler_block(manifest), model)
        return cls.parse(config, model).bind(export, manifest_version(manifest))
