"""The image kit's tensor contract (handlers/tensors.py; served by oip/): encoded images (PNG, JPEG, WebP)
as the elements of the BYTES input `image`, or grey grids in [0, pixel_max] as the FP32 or UINT8
input `grid` (images x rows x columns); a request sends one of the two, read as the kit's request
(`decode.ImageInput`). The answer has one row per image, in order (`outputs_of`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers.errors import BadField
from handlers.kits.image.classifier import ImageAnswer
from handlers.kits.image.decode import ImageInput, count_images
from handlers.kits.image.settings import ImageSettings
from handlers.tensors import (
    Output,
    Tensor,
    classification_answer,
    classification_outputs,
    element_bytes,
)


def inputs(settings: ImageSettings) -> tuple[Tensor, ...]:
    return (
        Tensor("image", "BYTES", (-1,), optional=True),
        Tensor("grid", "FP32", (-1, -1, -1), accepts=("UINT8",), optional=True),
    )


def outputs(settings: ImageSettings) -> tuple[Tensor, ...]:
    return (*classification_outputs(settings.export.classes), Tensor("polarity", "BYTES", (-1,)))


def request_of(
    tensors: dict[str, np.ndarray], parameters: dict[str, Any], settings: ImageSettings
) -> ImageInput:
    """The images as the kit's request: encoded images' bytes or grids' rows (the model checks
    them as the {"images": [...]} body of their base64 and rows)."""
    if ("image" in tensors) == ("grid" in tensors):
        raise BadField('send one input: "image" (encoded images) or "grid" (grey grids)')
    given = tensors["image"].size if "image" in tensors else tensors["grid"].shape[0]
    count_images(given, settings)  # from the tensor's shape, before any image is read
    if "image" in tensors:
        images = enumerate(tensors["image"].reshape(-1))
        return ImageInput(tuple(element_bytes(x, "image", i) for i, x in images))
    return ImageInput(tuple(tensors["grid"].tolist()))


def outputs_of(answer: ImageAnswer, settings: ImageSettings) -> list[Output]:
    """One row per image, in order: the classification tensors and `polarity`."""
    return row_tensors(answer.rows(), settings)


def row_tensors(rows: list[dict], settings: ImageSettings) -> list[Output]:
    """Answer rows (as the JSON answer writes them) → the output tensors."""
    return [
        *classification_answer(rows, settings.export.classes),
        Output("polarity", "BYTES", np.array([r["polarity"].encode() for r in rows], dtype=object)),
    ]
