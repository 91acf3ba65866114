"""The text kit's contract, the server's side: it decodes requests (inputs.py: `TextRequest` and
its forms) and writes answers with it (`Classification`, the answer type, and its forms: the JSON
body TorchServe sends, the tensors the Open Inference Protocol sends, the row scoring writes; each
written once from the answer). The client's side, building requests and reading answers
(`request_json`, `decode_answer`), is clients/kits/text.py.

Request: {"text": "..."} (one answer), {"texts": [...]} (a list of answers), or a text/plain body.
Answer: {"label", "probabilities" {label: p}, "uncertainty" {...}, "truncated", "model"}.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from handlers.codec import Reply
from handlers.kits.text.inputs import TextRequest, parse_texts
from handlers.tensors import Output, classification_answer

__all__ = ["Classification", "TextRequest", "parse_texts"]


@dataclass(frozen=True)
class Classification:
    """The answer to one request: one prediction per text, in order."""

    predictions: tuple[dict, ...]
    """Each text's prediction (label, probabilities, uncertainty, truncated, model)."""
    many: bool
    """The request sent {"texts": [...]}: the answer is a list even for one text."""

    def to_body(self) -> dict | list[dict]:
        """Its one prediction, or the list for a {"texts": [...]} request."""
        return list(self.predictions) if self.many else self.predictions[0]

    def to_json(self) -> str:
        return json.dumps(self.to_body())

    def reply(self) -> Reply:
        """The served answer (TextModel.reply)."""
        return Reply(self.to_json(), "application/json", {})

    def to_row(self) -> dict | list[dict]:
        """The answer as scoring writes it: the served JSON's value, without the JSON."""
        return self.to_body()

    def to_tensors(self, labels: Sequence[str]) -> list[Output]:
        """One row per text: the classification tensors and `truncated` (values as answered)."""
        rows = list(self.predictions)
        return [
            *classification_answer(rows, labels),
            Output("truncated", "BOOL", np.array([bool(r["truncated"]) for r in rows])),
        ]
