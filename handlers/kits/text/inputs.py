"""The text kit's request type, `TextRequest`, and its forms: from a decoded JSON or text body
(`parse_texts`) or from the BYTES tensor `text` (`from_tensors`); every form is checked against
the served limits (its bad-input cases: not a string,
empty or blank, not valid Unicode, too many bytes, too many texts, a body of the wrong shape; the
body that is not UTF-8 is handlers/codec.py's, a tensor element that is not, handlers/tensors.py's).

Accepted: {"text": "..."} → one result; a text/plain body → one result; {"texts": [...]} → a list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from handlers.codec import Payload
from handlers.errors import BadEncoding, BadField, EmptyInput, TooLarge
from handlers.tensors import texts as tensor_texts


@dataclass(frozen=True)
class TextRequest:
    texts: tuple[str, ...]
    many: bool
    """True for {"texts": [...]}: the response is a list even for one text."""
    pieces: tuple[list[int], ...] = ()
    """Each text's token ids (TextEncoder.pieces), tokenized once at parse: they price the
    request (its budget) and become the runtime's input."""

    @classmethod
    def from_tensors(
        cls, tensors: dict[str, np.ndarray], max_texts: int | None = None
    ) -> TextRequest:
        """The BYTES tensor `text`, one text per element: as a {"texts": [...]} request (a list
        of answers), not yet checked (`checked`). With `max_texts`, more elements than that are
        refused from the tensor's size, before any text is decoded."""
        if max_texts is not None:
            count_texts(tensors["text"].size, max_texts)
        return cls(tuple(tensor_texts(tensors["text"], "text")), many=True)

    def checked(self, max_bytes: int, max_texts: int) -> TextRequest:
        """The same request, checked against the limits as its JSON body would be."""
        if self.many:
            return TextRequest(check_texts(self.texts, max_bytes, max_texts), True, self.pieces)
        [text] = self.texts
        return TextRequest((check_text(text, max_bytes),), False, self.pieces)


def check_text(text: object, max_bytes: int, where: str = "text") -> str:
    if not isinstance(text, str):
        raise BadField(f"{where} must be a string, not {type(text).__name__}")
    if not text.strip():
        raise EmptyInput(f"{where} is empty")
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        # JSON "\ud800" escapes decode to lone surrogates, which the tokenizer cannot take.
        raise BadEncoding(f"{where} is not valid Unicode (unpaired surrogate)") from None
    if size > max_bytes:
        raise TooLarge(f"{where} is {size} bytes; the limit is {max_bytes}")
    return text


def parse_texts(payload: Payload, max_bytes: int, max_texts: int) -> TextRequest:
    """Payload → TextRequest, or raise a RequestError naming what is wrong."""
    if payload.kind == "text":
        return TextRequest((check_text(payload.value, max_bytes, "the body"),), many=False)
    body = payload.value
    if not isinstance(body, dict):
        raise BadField(
            f'the JSON body must be an object with "text" or "texts", not {_json_type(body)}'
        )
    if "text" in body and "texts" in body:
        raise BadField('send either "text" or "texts", not both')
    if "text" in body:
        return TextRequest((check_text(body["text"], max_bytes),), many=False)
    if "texts" in body:
        texts = body["texts"]
        if not isinstance(texts, list):
            raise BadField(f'"texts" must be a list of strings, not {_json_type(texts)}')
        return TextRequest(check_texts(texts, max_bytes, max_texts), many=True)
    raise BadField('the JSON body needs a "text" string or a "texts" list')


def count_texts(n: int, max_texts: int) -> None:
    if n > max_texts:
        raise TooLarge(f'"texts" has {n} items; the limit is {max_texts}')


def check_texts(texts: Sequence[object], max_bytes: int, max_texts: int) -> tuple[str, ...]:
    """A "texts" list's items, checked: at least one, at most `max_texts`, each a text."""
    if not texts:
        raise EmptyInput('"texts" is an empty list')
    count_texts(len(texts), max_texts)
    return tuple(check_text(t, max_bytes, f"texts[{i}]") for i, t in enumerate(texts))


def _json_type(value: object) -> str:
    names = {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        int: "number",
        float: "number",
    }
    return "null" if value is None else names.get(type(value), type(value).__name__)
