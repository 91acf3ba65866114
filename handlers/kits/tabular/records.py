"""A request's records and its answer, the kit's typed request (`Records`) and answer (`Answers`)
with their forms: one record as a JSON object `{"feature": value, ...}`, many as
`{"records": [{...}, ...]}` (answered with a list), or `text/csv` with a header row and one row
per record (always a list), or one tensor per feature (`Records.from_tensors`; the answer's
`to_tensors`), or a scoring row (`Answers.to_row`); counted against `max_records` before any
record is checked, each record checked by the schema (schema.py). A batch's records go through the
graph in one call (`rows_of`) and come back as each request's `Answers` (`answered`). A request's
cost is known once its body is read: its records for a prediction, records x forward passes for an
explanation (`records_budget`, `explanation_budget`)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from handlers import codec
from handlers.budget import Budget
from handlers.codec import Reply
from handlers.errors import BadEncoding, BadField, EmptyInput, TooLarge
from handlers.kits.tabular.distance import outputs as distance_outputs
from handlers.kits.tabular.schema import CATEGORY, Schema
from handlers.tensors import Output, classification_answer, texts

if TYPE_CHECKING:
    from handlers.service import Request

CSV_TYPE = "text/csv"
RECORDS_KEY = "records"


@dataclass(frozen=True)
class Records:
    """A request's records, checked (each a complete {feature: value} in schema order) once the
    model parsed it (`read_records`, `checked`)."""

    rows: tuple[dict[str, Any], ...]
    many: bool
    """Sent as {"records": [...]} or CSV: answered with a list."""

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, np.ndarray], schema: Schema, max_records: int | None = None
    ) -> Records:
        """One tensor per feature, one element per record: as a {"records": [...]} request, not
        yet checked (`checked`). The records are counted from the tensors' sizes (and, with
        `max_records`, refused past it) before any record is built."""
        sizes = {a.size for a in tensors.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise BadField("every input must hold one element per record, at least one record")
        records = sizes.pop()
        if max_records is not None:
            _count(records, max_records)
        kinds = {f.name: f.kind for f in schema.features}
        columns = {
            n: texts(a, n) if kinds[n] == CATEGORY else a.reshape(-1).tolist()
            for n, a in tensors.items()
        }
        return cls(tuple({n: c[i] for n, c in columns.items()} for i in range(records)), True)

    def checked(self, schema: Schema, max_records: int) -> Records:
        """The same request, checked as its JSON body would be."""
        if self.many:
            return check_records(list(self.rows), schema, max_records)
        return Records((schema.check(self.rows[0], "the record"),), False)

    @property
    def cost(self) -> int:
        """A prediction's work: records through the graph."""
        return len(self.rows)


@dataclass(frozen=True)
class Answers:
    """The answer to one request: one row per record, a list when it sent many."""

    rows: tuple[dict, ...]
    many: bool

    def to_row(self) -> dict | list[dict]:
        """The answer as scoring writes it: the served JSON's value, without the JSON."""
        return list(self.rows) if self.many else self.rows[0]

    def reply(self) -> Reply:
        return Reply(json.dumps(self.to_row()), "application/json", {})

    def to_tensors(self, classes: Sequence[str]) -> list[Output]:
        """One row per record: the classification tensors and the distance's (values as
        answered)."""
        rows = list(self.rows)
        return [*classification_answer(rows, classes), *distance_outputs(rows)]


def records_budget(budget: int) -> Budget:
    """A batch's records (the lifecycle applies it before `inference`): past `budget` a request
    gets 503 + Retry-After (handlers/budget.py)."""
    return Budget(budget, "records", lambda r: r.cost if isinstance(r, Records) else None)


def explanation_budget(passes: int, limit: int, budget: int) -> Budget:
    """Explanations priced at records x `passes` (Attributor.passes) before any runs: past `limit`
    400 too_large, past the batch's `budget` 503 (applied by the lifecycle)."""
    return Budget(
        budget, "record-passes", lambda r: len(r.rows) * passes if isinstance(r, Records) else None,
        limit,
    )  # fmt: skip


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
        return check_records(body[RECORDS_KEY], schema, max_records)
    if not isinstance(body, dict):
        raise BadField('the JSON body must be one record (an object) or {"records": [...]}')
    return Records((schema.check(body, "the record"),), False)


def check_records(records: Any, schema: Schema, max_records: int) -> Records:
    """A "records" list, checked: a non-empty list, at most `max_records`, each by the schema."""
    if not isinstance(records, list) or not records:
        raise BadField(f"{RECORDS_KEY!r} must be a non-empty list of records")
    _count(len(records), max_records)
    return Records(tuple(schema.check(r, f"record {i}") for i, r in enumerate(records)), True)


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
