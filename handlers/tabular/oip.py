"""The tabular model's tensor contract (handlers/tensors.py; served by oip/): one input per
feature of its schema, named as the feature (FP64 for numbers, BYTES for categories; an optional
feature's input may be left out), one element per record, read as a {"records": [...]} request
(`Records.from_tensors`); the answer has one row per record (`Answers.to_tensors`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers import tensors as t
from handlers.kits.tabular import distance
from handlers.kits.tabular.records import Answers, Records
from handlers.kits.tabular.schema import CATEGORY
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


def request_of(
    tensors: dict[str, np.ndarray], parameters: dict[str, Any], settings: TabularSettings
) -> Records:
    """The columns as the kit's request (the model checks them by the schema, as a JSON body)."""
    return Records.from_tensors(tensors, settings.export.schema, settings.max_records)


def outputs_of(answer: Answers, settings: TabularSettings) -> list[t.Output]:
    return answer.to_tensors(settings.export.classes)
