"""Answers → typed Parquet columns.

Each answer's JSON fields become columns, nested objects flattened with "." (`label`,
`probabilities.positive`, `uncertainty.entropy`, ...). The schema is the one the model's own example
answer (handlers/<model>/samples.py EXAMPLE) has, so every partition of a job has the same columns
and types, refused rows and all-refused partitions included. A refused row has its `error`
(kind, reason, HTTP status) and nulls elsewhere; a field outside the example's schema is kept, as
JSON, in `extra`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

ERROR = "error"
EXTRA = "extra"
ERROR_TYPE = pa.struct([("kind", pa.string()), ("reason", pa.string()), ("status", pa.int32())])


def flatten(answer: dict, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}, "c": 2} → {"a.b": 1, "c": 2}; lists and scalars are kept as they are."""
    out: dict[str, Any] = {}
    for key, value in answer.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def is_refusal(answer: dict) -> bool:
    """A refused row's answer: its error body (`error`, `kind`) and the HTTP `status`."""
    return "status" in answer and "kind" in answer and ERROR in answer


def answer_schema(example_answer: dict, id_field: pa.Field) -> pa.Schema:
    """The output schema: the id column, the example answer's flattened fields, error, extra."""
    if is_refusal(example_answer):
        raise ValueError(f"the model refused its own example: {example_answer.get(ERROR)}")
    fields = [id_field]
    for name, value in flatten(example_answer).items():
        if value is None or value == []:
            continue  # no type to give it (an empty list's items have none): it goes to `extra`
        kind = pa.array([value]).type
        if pa.types.is_integer(kind):
            kind = pa.int64()
        column = name if name not in (id_field.name, ERROR, EXTRA) else f"answer.{name}"
        fields.append(pa.field(column, kind))
    fields += [pa.field(ERROR, ERROR_TYPE), pa.field(EXTRA, pa.string())]
    return pa.schema(fields)


def to_table(ids: Sequence[Any], answers: Sequence[dict], schema: pa.Schema) -> pa.Table:
    """One output row per (id, answer), in order, cast into `schema`."""
    id_name = schema.field(0).name
    answer_columns = {
        f.name.removeprefix("answer."): f.name
        for f in schema
        if f.name not in (id_name, ERROR, EXTRA)
    }
    rows = []
    for rid, answer in zip(ids, answers, strict=True):
        row: dict[str, Any] = {id_name: rid}
        if is_refusal(answer):
            row[ERROR] = {
                "kind": str(answer["kind"]),
                "reason": str(answer[ERROR]),
                "status": int(answer["status"]),
            }
        else:
            extra = {}
            for name, value in flatten(answer).items():
                if name in answer_columns:
                    row[answer_columns[name]] = value
                elif value is not None:
                    extra[name] = value
            row[EXTRA] = json.dumps(extra, sort_keys=True) if extra else None
        rows.append(row)
    return pa.Table.from_pylist(rows, schema=schema)
