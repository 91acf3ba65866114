"""Sentiment's tensor contract (handlers/tensors.py; served by oip/): each element of the BYTES
input `text` is one review; the answer has one row per review, in order."""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers.codec import Reply
from handlers.sentiment.codec import request_json
from handlers.sentiment.settings import SentimentSettings
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


def inputs(settings: SentimentSettings) -> tuple[Tensor, ...]:
    return (Tensor("text", "BYTES", (-1,)),)


def outputs(settings: SentimentSettings) -> tuple[Tensor, ...]:
    return (*classification_outputs(settings.labels), Tensor("truncated", "BOOL", (-1,)))


def native(
    tensors: dict[str, np.ndarray], parameters: dict[str, Any], settings: SentimentSettings
) -> Native:
    """The texts as the {"texts": [...]} body a JSON client sends (its checks and limits apply)."""
    return Native(
        json_body(request_json(texts(tensors["text"], "text"))),
        {"Content-Type": "application/json"},
    )


def answer(reply: Reply, settings: SentimentSettings) -> list[Output]:
    rows = answer_rows(reply.body)
    return [
        *classification_answer(rows, settings.labels),
        Output("truncated", "BOOL", np.array([bool(r["truncated"]) for r in rows])),
    ]
