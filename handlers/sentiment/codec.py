"""sentiment's wire contract: the text kit's (handlers/kits/text/codec.py, inputs.py).

Request: {"text": "..."} (one answer), {"texts": [...]} (a list of answers), or a text/plain body.
Answer: {"label", "probabilities" {label: p}, "uncertainty" {...}, "truncated", "model"}.
"""

from handlers.kits.text.codec import (
    Classification,
    TextAnswer,
    TextRequest,
    decode_answer,
    parse_texts,
    request_json,
)

__all__ = [
    "Classification", "TextAnswer", "TextRequest", "decode_answer", "parse_texts", "request_json",
]  # fmt: skip
