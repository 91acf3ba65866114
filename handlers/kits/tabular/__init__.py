"""The tabular kit: records in as JSON objects or CSV rows, checked against the feature schema
training learned, encoded for the graph, priced before they run, and explained per feature.

A model of this modality names its schema in its manifest (`Schema.to_block`, written by training
from the records it trained on: each feature's name, type, the range or categories seen, whether a
record may leave it out) and takes everything else from here:

- bodies: one record as a JSON object `{"feature": value, ...}`, many as `{"records": [{...}, ...]}`
  (answered with a list), or `text/csv` with a header row and one row per record (always a list);
- checks: every violation of a record is named in its 400 (`BadField`), field by field: an unknown
  field, a missing required one, a number that is not a finite number, a category never seen;
- encoding: a number is placed where it lies in its training range, (value - low) / (high - low), so
  the range seen is [0, 1]; values past it are kept but clipped at `margin` ranges beyond (the graph
  was trained to be unsure out there: a value a million ranges out reads as one `margin` out),
  and each record's `out_of_range` lists the features it has outside the range seen; a category is
  one-hot; a missing optional feature takes its training mean (or most frequent category);
- cost: a prediction costs its records (`Records.cost`), an explanation its records times the
  forward passes per record (`Attributor.passes`), both known once the body is read and before any
  inference, so budgets refuse past them without running;
- attributions: Captum over the served runtime's forward pass, one feature (all its one-hot
  columns) at a time against its training baseline.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from handlers import codec
from handlers.budget import Budget
from handlers.codec import Reply
from handlers.errors import ArchiveError, BadEncoding, BadField, EmptyInput, TooLarge, echo
from handlers.explain import JsonExplanation

if TYPE_CHECKING:
    from handlers.service import Request

NUMBER, CATEGORY = "number", "category"
CSV_TYPE = "text/csv"
RECORDS_KEY = "records"
JSON = "application/json"
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
class Records:
    """A request's records, checked (each a complete {feature: value} in schema order)."""

    rows: tuple[dict[str, Any], ...]
    many: bool
    """Sent as {"records": [...]} or CSV: answered with a list."""

    @property
    def cost(self) -> int:
        """A prediction's work: records through the graph."""
        return len(self.rows)


@dataclass(frozen=True)
class Answers:
    """The answer to one request: one row per record, a list when it sent many."""

    rows: tuple[dict, ...]
    many: bool

    def reply(self) -> Reply:
        return Reply(json.dumps(list(self.rows) if self.many else self.rows[0]), JSON, {})


def records_budget(budget: int) -> Budget:
    """A batch's records (the lifecycle applies it before `inference`): past `budget` a request
    gets 503 + Retry-After (handlers/budget.py)."""
    return Budget(budget, "records", lambda r: r.cost if isinstance(r, Records) else None)


def rows_of(admitted: Sequence[Any]) -> list[dict[str, Any]]:
    """The admitted requests' records, in order, for one runtime call."""
    return [row for r in admitted if isinstance(r, Records) for row in r.rows]


def answered(admitted: Sequence[Any], rows: Iterable[dict]) -> list[Any]:
    """The batch's answers: each admitted request's rows (`rows` in record order) as its Answers."""
    it = iter(rows)
    return [
        Answers(tuple(next(it) for _ in r.rows), r.many) if isinstance(r, Records) else r
        for r in admitted
    ]


def explanation_budget(passes: int, limit: int, budget: int) -> Budget:
    """Explanations priced at records x `passes` (Attributor.passes) before any runs: past `limit`
    400 too_large, past the batch's `budget` 503 (applied by the lifecycle)."""
    return Budget(
        budget, "record-passes", lambda r: len(r.rows) * passes if isinstance(r, Records) else None,
        limit,
    )  # fmt: skip


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


def read_records(request: Request, schema: Schema, max_records: int) -> Records:
    """One request → its checked records, or a RequestError: more than `max_records` is 400
    too_large, counted before any record is checked (CSV: its line count, before parsing)."""
    value, kind = codec.request_body(request, binary_types=(CSV_TYPE,))
    if kind == CSV_TYPE:
        return _from_csv(codec.to_text(value), schema, max_records)
    payload = codec.decode(value, kind)
    if payload.kind == "text":  # text/plain, or no content type (gRPC): read as CSV
        return _from_csv(payload.value, schema, max_records)
    body = payload.value
    if isinstance(body, dict) and set(body) == {RECORDS_KEY}:
        records = body[RECORDS_KEY]
        if not isinstance(records, list) or not records:
            raise BadField(f"{RECORDS_KEY!r} must be a non-empty list of records")
        _count(len(records), max_records)
        return Records(tuple(schema.check(r, f"record {i}") for i, r in enumerate(records)), True)
    if not isinstance(body, dict):
        raise BadField('the JSON body must be one record (an object) or {"records": [...]}')
    return Records((schema.check(body, "the record"),), False)


def _count(n: int, limit: int) -> None:
    if n > limit:
        raise TooLarge(f"the request has {n} records; the limit is {limit}")


def _from_csv(text: str, schema: Schema, max_records: int) -> Records:
    _count(text.strip().count("\n"), max_records)  # rows after the header, at most
    try:
        rows = [row for row in csv.reader(io.StringIO(text.strip())) if row]
    except csv.Error as e:  # a NUL byte, a cell past the csv module's field limit
        raise BadEncoding(f"the body is not readable CSV ({e})") from None
    if len(rows) < 2:
        raise EmptyInput("the CSV needs a header row and at least one record")
    header = [h.strip() for h in rows[0]]
    if len(set(header)) != len(header):
        raise BadField("the CSV header names a column twice")
    records = []
    for i, row in enumerate(rows[1:]):
        if len(row) != len(header):
            raise BadField(f"CSV row {i + 1} has {len(row)} cells; the header has {len(header)}")
        cells = dict(zip(header, (c.strip() for c in row), strict=True))
        records.append(schema.check(cells, f"CSV row {i + 1}"))
    return Records(tuple(records), True)


# Attributions.
def log_odds(logits: np.ndarray, temperature: float) -> np.ndarray:
    """(B, C) logits → (B, C) calibrated log-odds of each label against all the others."""
    z = np.asarray(logits, np.float64) / temperature
    log_p = z - np.logaddexp.reduce(z, axis=-1, keepdims=True)
    rest = np.stack(
        [np.logaddexp.reduce(np.delete(log_p, c, -1), -1) for c in range(z.shape[-1])], -1
    )
    return log_p - rest


@dataclass(frozen=True)
class Attributor:
    """Per-feature attributions of one record: Captum's FeatureAblation (each feature, all its
    columns, set to its training baseline) or ShapleyValueSampling, over `forward` ((N, width)
    encoded records → (N, C) scores, the served runtime's), for the target's score."""

    schema: Schema
    forward: Callable[[np.ndarray], np.ndarray]
    method: str = "ablation"
    samples: int = 8
    """Shapley sampling: permutations (each one pass per feature)."""

    def passes(self) -> int:
        """Forward passes per explained record: the cost model of an explanation."""
        n = len(self.schema.features)
        return n * (self.samples if self.method == "shapley" else 1) + 1

    def attribute(self, x: np.ndarray, target: int) -> tuple[dict[str, float], int]:
        """(feature → attribution, forward passes made) for one encoded record `x` (width,)."""
        import torch
        from captum.attr import FeatureAblation, ShapleyValueSampling

        evaluations = 0

        def forward(batch: torch.Tensor) -> torch.Tensor:
            nonlocal evaluations
            arr = batch.detach().numpy()
            evaluations += len(arr)
            return torch.from_numpy(np.asarray(self.forward(arr), np.float64))

        groups = self.schema.groups()
        args = {
            "baselines": torch.from_numpy(self.schema.baseline()[None]),
            "target": target,
            "feature_mask": torch.from_numpy(groups[None]),
            "perturbations_per_eval": len(self.schema.features),
        }
        inputs = torch.from_numpy(x[None].astype(np.float32))
        if self.method == "shapley":
            torch.manual_seed(0)  # Captum draws its permutations from torch's generator
            attr = ShapleyValueSampling(forward).attribute(inputs, n_samples=self.samples, **args)
        else:
            attr = FeatureAblation(forward).attribute(inputs, **args)
        first = np.searchsorted(groups, np.arange(len(self.schema.features)))
        values = attr[0].numpy()[first]
        return {
            f.name: float(v) for f, v in zip(self.schema.features, values, strict=True)
        }, evaluations


@dataclass(frozen=True)
class FeatureExplanation(JsonExplanation):
    """One record's explanation: each feature's attribution to the target label's calibrated
    log-odds (> 0 pushes toward it), against the feature's training baseline."""

    target: str
    probability: float
    attributions: dict[str, float]
    method: str
    evaluations: int
    out_of_range: list[str]
    model: dict

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "probability": round(self.probability, 6),
            "attributions": self.attributions,
            "method": self.method,
            "evaluations": self.evaluations,
            "out_of_range": self.out_of_range,
            "model": self.model,
        }
