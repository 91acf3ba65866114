"""The tensor view of a model's contract, for tensor protocols (the Open Inference Protocol,
oip/): the types each model's handlers/<name>/oip.py declares its tensors with, and the helpers
they share. Runtime-neutral: no server is imported here.

A model's tensor contract is four functions of its settings (`TensorContract` in handlers/spec.py;
oip/contract.py reads them):

    inputs(settings) -> tuple[Tensor, ...]
    outputs(settings) -> tuple[Tensor, ...]
    request_of(tensors: dict[str, np.ndarray], parameters: dict, settings) -> its typed request
    outputs_of(typed answer, settings) -> list[Output]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from handlers.errors import BadEncoding, BadField
from handlers.uncertainty import SCORES


@dataclass(frozen=True)
class Tensor:
    """One input or output tensor as the model's metadata names it."""

    name: str
    datatype: str
    """The datatype metadata lists (OIP names: BYTES, FP32, FP64, INT64, BOOL, UINT8...)."""
    shape: tuple[int, ...]
    """-1 for a dimension of any size."""
    accepts: tuple[str, ...] = ()
    """Other datatypes an input also takes (digits' grids: UINT8 beside FP32)."""
    optional: bool = False
    """An input a request may leave out, or an output only some answers carry."""

    def metadata(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


@dataclass(frozen=True)
class Output:
    """One output tensor of an answer."""

    name: str
    datatype: str
    data: np.ndarray


def flag(parameters: Mapping[str, Any], name: str) -> bool:
    """A boolean parameter: true/false, or the strings "true"/"false"; absent is false."""
    value = parameters.get(name)
    if value is None or isinstance(value, bool):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BadField(f"parameter {name!r} must be true or false, not {value!r}")


def element_bytes(item: Any, name: str, i: int) -> bytes:
    """A BYTES tensor element's bytes: bytes, or a string's UTF-8 (anything else, a number or
    null, is refused: it is neither text nor an encoded file)."""
    if isinstance(item, str):
        return item.encode("utf-8", "surrogatepass")
    if not isinstance(item, bytes | bytearray):
        raise BadField(f"{name}[{i}] must be a string")
    return bytes(item)


def texts(array: np.ndarray, name: str) -> list[str]:
    """A BYTES tensor's elements as UTF-8 text (`element_bytes`, decoded)."""
    out = []
    for i, item in enumerate(array.reshape(-1)):
        try:
            out.append(element_bytes(item, name, i).decode("utf-8"))
        except UnicodeDecodeError:
            raise BadEncoding(f"{name}[{i}] is not valid UTF-8") from None
    return out


def classification_outputs(labels: Sequence[str]) -> tuple[Tensor, ...]:
    """The outputs of a classifier whose JSON answer rows are {"label", "probabilities" {label: p},
    "uncertainty" {...}}: one row per input element."""
    return (
        Tensor("label", "BYTES", (-1,)),
        Tensor("probabilities", "FP64", (-1, len(labels))),
        *(Tensor(name, "FP64", (-1,)) for name in SCORES),
    )


def classification_answer(rows: list[dict], labels: Sequence[str]) -> list[Output]:
    """JSON answer rows → the tensors of `classification_outputs` (values exactly as answered)."""
    return [
        Output("label", "BYTES", np.array([r["label"].encode() for r in rows], dtype=object)),
        Output(
            "probabilities",
            "FP64",
            np.array(
                [[r["probabilities"][lab] for lab in labels] for r in rows], np.float64
            ).reshape(len(rows), len(labels)),
        ),
        *(
            Output(name, "FP64", np.array([r["uncertainty"][name] for r in rows], np.float64))
            for name in SCORES
        ),
    ]
