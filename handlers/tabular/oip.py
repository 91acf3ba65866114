"""The tabular model's tensor contract (handlers/tensors.py; served by oip/): one input per
feature of its schema, named as the feature (FP64 for numbers, BYTES for categories; an optional
feature's input may be left out), one element per record; the answer has one row per record."""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers import tensors as t
from handlers.codec import Reply
from handlers.errors import BadField
from handlers.kits.tabular import CATEGORY, RECORDS_KEY, distance
from handlers.tabular.settings import TabularSettings


def inputs(settings: TabularSettings) -> tuple[t.Tensor, ...]:
    return tuple(
        t.Tensor(f.name, "BYTES" if f.kind == CATEGORY else "FP64", (-1,),
               accepts=() if f.kind == CATEGORY else ("FP32", "INT64", "INT32"),
               optional=not f.required)
        for f in settings.export.schema.features
    )  # fmt: skip


def outputs(settings: TabularSettings) -> tuple[t.Tensor, ...]:
    return (*t.classification_outputs(settings.export.classes), *distance.OUTPUTS)


def native(
    tensors: dict[str, np.ndarray], parameters: dict[str, Any], settings: TabularSettings
) -> t.Native:
    """The columns as the {"records": [...]} body a JSON client sends (the schema's checks apply)."""
    kinds = {f.name: f.kind for f in settings.export.schema.features}
    columns = {
        n: t.texts(a, n) if kinds[n] == CATEGORY else a.reshape(-1).tolist()
        for n, a in tensors.items()
    }
    sizes = {len(c) for c in columns.values()}
    if len(sizes) != 1 or 0 in sizes:
        raise BadField("every input must hold one element per record, at least one record")
    records = [{n: c[i] for n, c in columns.items()} for i in range(sizes.pop())]
    return t.Native(t.json_body({RECORDS_KEY: records}), {"Content-Type": "application/json"})


def answer(reply: Reply, settings: TabularSettings) -> list[t.Output]:
    rows = t.answer_rows(reply.body)
    return [*t.classification_answer(rows, settings.export.classes), *distance.outputs(rows)]
