"""The text kit's tensor contract (handlers/tensors.py; served by oip/): each element of the BYTES
input `text` is one text (UTF-8), sent on as the {"texts": [...]} body a JSON client sends; the
answer has one row per text, in order: the classification tensors and `truncated`."""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers.codec import Reply
from handlers.kits.text.codec import request_json
from handlers.kits.text.settings import TextSettings
from handlers.tensors import (
    Native,
    Output,
    Tensor,
    answer_rows,
    classification_answer,
    classification_outputs,
    json_body,
    texts,
)


def inputs(settings: TextSettings) -> tuple[Tensor, ...]:
    return (Tensor("text", "BYTES", (-1,)),)


def outputs(settings: TextSettings) -> tuple[Tensor, ...]:
    return (*classification_outputs(settings.labels), Tensor("truncated", "BOOL", (-1,)))


def native(
    tensors: dict[str, np.ndarray], parameters: dict[str, Any], settings: TextSettings
) -> Native:
    """The texts as the {"texts": [...]} body a JSON client sends (its checks and limits apply)."""
    return Native(
        json_body(request_json(texts(tensors["text"], "text"))),
        {"Content-Type": "application/json"},
    )


def answer(reply: Reply, settings: TextSettings) -> list[Output]:
    rows = answer_rows(reply.body)
    return [
        *classification_answer(rows, settings.labels),
        Output("truncated", "BOOL", np.array([bool(r["truncated"]) for r in rows])),
    ]
