"""The text kit's tensor contract (handlers/tensors.py; served by oip/): each element of the BYTES
input `text` is one text (UTF-8), read as a {"texts": [...]} request (`TextRequest.from_tensors`);
the answer has one row per text, in order: the classification tensors and `truncated`
(`Classification.to_tensors`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers.kits.text.codec import Classification
from handlers.kits.text.inputs import TextRequest
from handlers.kits.text.settings import TextSettings
from handlers.tensors import Output, Tensor, classification_outputs


def inputs(settings: TextSettings) -> tuple[Tensor, ...]:
    return (Tensor("text", "BYTES", (-1,)),)


def outputs(settings: TextSettings) -> tuple[Tensor, ...]:
    return (*classification_outputs(settings.export.labels), Tensor("truncated", "BOOL", (-1,)))


def request_of(
    tensors: dict[str, np.ndarray], parameters: dict[str, Any], settings: TextSettings
) -> TextRequest:
    """The texts as the kit's request (the model checks its limits, as for a JSON body)."""
    return TextRequest.from_tensors(tensors, settings.max_texts)


def outputs_of(answer: Classification, settings: TextSettings) -> list[Output]:
    return answer.to_tensors(settings.export.labels)
