"""The feature schema training learned (`Schema.learn`, written into the manifest by `to_block`,
read back by `from_block`): each feature's name, type, the range or categories seen, whether a
record may leave it out. Serving checks every record against it, naming every violation in one
400 (`check`), and encodes checked records for the graph (`encode`): a number placed where it lies
in its training range, clipped at `margin` ranges beyond; a category one-hot."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from handlers.errors import ArchiveError, BadField, echo

NUMBER, CATEGORY = "number", "category"
MAX_VIOLATIONS = 8
"""Violations named per refusal (the reason is bounded; the rest are counted)."""


@dataclass(frozen=True)
class Feature:
    """One column of the schema, as training saw it."""

    name: str
    kind: str
    """"number" or "category"."""
    required: bool = True
    low: float = 0.0
    """number: the smallest value seen in training."""
    high: float = 1.0
    """number: the largest value seen in training."""
    mean: float = 0.0
    """number: the training mean: a missing optional value, and the attribution baseline."""
    categories: tuple[str, ...] = ()
    """category: the values seen in training, in one-hot order."""
    default: str = ""
    """category: the most frequent value: a missing optional value, and the baseline."""

    @property
    def width(self) -> int:
        return len(self.categories) if self.kind == CATEGORY else 1

    def to_block(self) -> dict[str, Any]:
        block: dict[str, Any] = {"name": self.name, "type": self.kind, "required": self.required}
        if self.kind == NUMBER:
            return block | {"low": self.low, "high": self.high, "mean": self.mean}
        return block | {"categories": list(self.categories), "default": self.default}

    @classmethod
    def from_block(cls, block: Any) -> Feature:
        if not isinstance(block, dict) or not isinstance(block.get("name"), str):
            raise ArchiveError(f"a schema feature must be an object with a name, not {block!r}")
        name, kind, required = block["name"], block.get("type"), block.get("required", True)
        if kind not in (NUMBER, CATEGORY) or not isinstance(required, bool):
            raise ArchiveError(f"schema feature {name!r}: type number|category, required a bool")
        if kind == CATEGORY:
            cats = block.get("categories")
            if not isinstance(cats, list) or not cats or not all(isinstance(c, str) for c in cats):
                raise ArchiveError(f"schema feature {name!r}: categories must be strings")
            if block.get("default") not in cats or len(set(cats)) != len(cats):
                raise ArchiveError(f"schema feature {name!r}: distinct categories and a default")
            return cls(name, kind, required, categories=tuple(cats), default=block["default"])
        nums: list[Any] = [block.get(k) for k in ("low", "high", "mean")]
        if not all(_is_number(v) and math.isfinite(v) for v in nums) or nums[0] > nums[1]:
            raise ArchiveError(f"schema feature {name!r}: finite low <= high and a mean")
        low, high, mean = (float(v) for v in nums)
        return cls(name, kind, required, low=low, high=high, mean=mean)

    def baseline(self) -> Any:
        return self.default if self.kind == CATEGORY else self.mean

    def outside(self, value: Any) -> bool:
        return self.kind == NUMBER and not self.low <= value <= self.high


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass(frozen=True)
class Schema:
    features: tuple[Feature, ...]
    margin: float = 1.0
    """Encoded numbers are clipped to [-margin, 1 + margin] (ranges seen)."""

    @classmethod
    def learn(
        cls,
        columns: Mapping[str, Sequence[Any]],
        optional: Iterable[str] = (),
        margin: float = 1.0,
    ) -> Schema:
        """The schema of training columns: numbers where every value is one, else categories."""
        optional = set(optional)
        features = []
        for name, values in columns.items():
            if all(_is_number(v) or isinstance(v, np.number) for v in values):
                a = np.asarray(values, np.float64)
                feature = Feature(name, NUMBER, name not in optional,
                                  float(a.min()), float(a.max()), round(float(a.mean()), 6))  # fmt: skip
            else:
                cats, counts = np.unique(np.asarray(values, str), return_counts=True)
                feature = Feature(name, CATEGORY, name not in optional,
                                  categories=tuple(map(str, cats)), default=str(cats[counts.argmax()]))  # fmt: skip
            features.append(feature)
        return cls(tuple(features), margin)

    def to_block(self) -> dict[str, Any]:
        return {"features": [f.to_block() for f in self.features], "margin": self.margin}

    @classmethod
    def from_block(cls, block: Any) -> Schema:
        if not isinstance(block, dict) or not isinstance(block.get("features"), list):
            raise ArchiveError("the manifest's schema must be {features: [...], margin}")
        features = tuple(Feature.from_block(f) for f in block["features"])
        names = [f.name for f in features]
        margin = block.get("margin", 1.0)
        if not features or len(set(names)) != len(names) or not _is_number(margin) or margin <= 0:
            raise ArchiveError("the schema needs distinctly named features and a positive margin")
        return cls(features, float(margin))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.features)

    @property
    def width(self) -> int:
        """Columns of the encoded record (the graph's input width)."""
        return sum(f.width for f in self.features)

    def groups(self) -> np.ndarray:
        """(width,) the feature each encoded column belongs to (Captum's feature mask)."""
        return np.repeat(np.arange(len(self.features)), [f.width for f in self.features])

    # The request's side.
    def check(self, record: Any, where: str) -> dict[str, Any]:
        """One record → its values in schema order, or a BadField naming every violation. A
        number is a JSON number or its text (a CSV cell, a table read as text)."""
        if not isinstance(record, dict):
            raise BadField(f"{where} must be an object of feature: value, not {echo(record)}")
        known = {f.name: f for f in self.features}
        problems = [f"{echo(k)} is not a feature of this model" for k in record if k not in known]
        values: dict[str, Any] = {}
        for f in self.features:
            value = record.get(f.name)
            if value is None or value == "":
                if f.required:
                    problems.append(f"{f.name!r} is required")
                values[f.name] = f.baseline()
            elif f.kind == CATEGORY:
                if not isinstance(value, str) or value not in f.categories:
                    problems.append(
                        f"{f.name!r} must be one of {list(f.categories)}, not {echo(value)}"
                    )
                values[f.name] = value
            else:
                number = _number(value)
                if number is None:
                    problems.append(f"{f.name!r} must be a finite number, not {echo(value)}")
                values[f.name] = number
        if problems:
            more = (
                f" (and {len(problems) - MAX_VIOLATIONS} more)"
                if len(problems) > MAX_VIOLATIONS
                else ""
            )
            raise BadField(f"{where}: " + "; ".join(problems[:MAX_VIOLATIONS]) + more)
        return values

    def encode(self, rows: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """Checked records → (N, width) float32, the graph's input, a column at a time."""
        columns = [np.zeros((len(rows), 0))]
        for f in self.features:
            values = [row[f.name] for row in rows]
            if f.kind == CATEGORY:
                columns.append(np.asarray(values, str)[:, None] == np.asarray(f.categories)[None])
                continue
            with np.errstate(over="ignore"):  # 1e308 past a small range: clipped just below
                where = (np.asarray(values, np.float64) - f.low) / (f.high - f.low or 1.0)
            columns.append(np.clip(where, -self.margin, 1.0 + self.margin)[:, None])
        return np.concatenate(columns, axis=1).astype(np.float32)

    def baseline(self) -> np.ndarray:
        """(width,) the encoded training baseline: means and most frequent categories."""
        return self.encode([{f.name: f.baseline() for f in self.features}])[0]

    def out_of_range(self, row: Mapping[str, Any]) -> list[str]:
        """The features of a checked record outside the range training saw."""
        return [f.name for f in self.features if f.outside(row[f.name])]


def _number(value: Any) -> float | None:
    """A JSON number or its text → a finite float, or None."""
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            return None
    if not _is_number(value):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer past any float (10**400)
        return None
    return number if math.isfinite(number) else None
