"""This model's JSON contract, both directions: clients build requests and read answers with it,
the server decodes requests (inputs.parse_texts) and encodes answers with it.

Request: {"text": "..."} (one answer), {"texts": [...]} (a list of answers), or a text/plain body.
Answer: {"label", "probabilities" {label: p}, "uncertainty" {...}, "truncated", "model"}.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from handlers.sentiment.inputs import TextRequest, parse_texts

__all__ = ["TextAnswer", "TextRequest", "decode_answer", "encode_answer", "parse_texts"]


def request_json(texts: str | Sequence[str]) -> dict:
    """One text → {"text"} (one answer); a sequence → {"texts"} (a list, even of one)."""
    if isinstance(texts, str):
        return {"text": texts}
    return {"texts": list(texts)}


def encode_answer(results: Sequence[dict], many: bool) -> bytes:
    """One request's answer: its one result, or the list for a {"texts": [...]} request."""
    return json.dumps(list(results) if many else results[0]).encode()


@dataclass(frozen=True)
class TextAnswer:
    label: str
    probabilities: dict[str, float]
    uncertainty: dict
    truncated: bool
    model: dict


def decode_answer(body: dict | list) -> list[TextAnswer]:
    """A parsed answer → one TextAnswer per text (a one-text request gives a list of one)."""
    items = body if isinstance(body, list) else [body]
    return [
        TextAnswer(
            a["label"],
            dict(a["probabilities"]),
            dict(a.get("uncertainty") or {}),
            bool(a.get("truncated", False)),
            dict(a.get("model") or {}),
        )  # fmt: skip
        for a in items
    ]
