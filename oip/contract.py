"""Tensors ↔ a model's own requests and answers, from the model's tensor contract.

Each registered model declares its Open Inference Protocol tensors once, in handlers/<name>/oip.py
(handlers/<family>/oip.py of a registered model):

    inputs(settings) -> tuple[Tensor, ...]     the input tensors it reads (metadata lists them)
    outputs(settings) -> tuple[Tensor, ...]    the output tensors its answers carry
    native(tensors, parameters, settings) -> Native      tensors → its own request (body, headers)
    answer(reply, settings) -> list[Output]    its own answer → output tensors

Model metadata (names, datatypes, shapes) is derived from `inputs`/`outputs` with the loaded
model's settings (labels, frequencies, image sizes), so nothing about a model is written twice.
`to_request` is the one place an OIP request becomes the runtime-neutral `Request` that
`ModelService` answers, exactly as TorchServe's adapter builds it from a row.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Mapping
from types import ModuleType
from typing import Any

import numpy as np

from handlers import registry
from handlers.codec import Reply
from handlers.errors import BadField, TooLarge
from handlers.service import EXPLAIN_INPUT, Request
from handlers.tensors import Native, Output, Tensor

EXPLAIN_PARAMETER = "explain"
"""A request parameter `explain: true` asks for the model's explanation instead of a prediction."""

EXPLANATION_OUTPUT = "explanation"
"""An explained request answers with one BYTES tensor: the model's explanation, as JSON."""

MAX_ELEMENTS = 1 << 22
"""Elements of one input tensor past which a request is refused before it is copied (the body
limit bounds the bytes; this bounds a shape that claims more than the body holds)."""


class Contract:
    """One loaded model's tensor contract (handlers/<family>/oip.py) with its settings."""

    def __init__(self, family: str, settings: Any):
        spec = registry.get(family)  # a registered model only
        try:
            module = importlib.import_module(f"handlers.{spec.name}.oip")
        except ModuleNotFoundError as err:
            raise LookupError(
                f"{family} has no tensor contract (handlers/{family}/oip.py)"
            ) from err
        self.module: ModuleType = module
        self.settings = settings
        self.inputs: tuple[Tensor, ...] = tuple(module.inputs(settings))
        self.outputs: tuple[Tensor, ...] = tuple(module.outputs(settings))

    def metadata(self, name: str, versions: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "versions": versions,
            "platform": "python-modelservice",
            "inputs": [t.metadata() for t in self.inputs],
            "outputs": [t.metadata() for t in self.outputs],
        }

    def read_inputs(self, given: list[Any]) -> dict[str, np.ndarray]:
        """The request's input tensors (kserve InferInputs) as arrays, checked against the
        contract: known names, accepted datatypes, the declared rank. A RequestError otherwise."""
        known = {t.name: t for t in self.inputs}
        arrays: dict[str, np.ndarray] = {}
        for item in given:
            spec = known.get(item.name)
            if spec is None:
                raise BadField(
                    f"unknown input {item.name!r}; this model reads {', '.join(sorted(known))}"
                )
            if item.name in arrays:
                raise BadField(f"input {item.name!r} is given twice")
            if item.datatype not in (spec.datatype, *spec.accepts):
                raise BadField(
                    f"input {item.name!r} is {item.datatype}; send "
                    + " or ".join((spec.datatype, *spec.accepts))
                )
            shape = [int(d) for d in item.shape]
            if len(shape) != len(spec.shape) or any(d < 0 for d in shape):
                raise BadField(
                    f"input {item.name!r} has shape {shape}; this model reads {list(spec.shape)}"
                )
            if math.prod(shape) > MAX_ELEMENTS:
                raise TooLarge(
                    f"input {item.name!r} has {math.prod(shape)} elements; the limit is "
                    f"{MAX_ELEMENTS}"
                )
            try:
                arrays[item.name] = item.as_numpy()
            except (ValueError, TypeError, OverflowError) as e:
                raise BadField(
                    f"input {item.name!r} does not hold its shape's data ({e})"
                ) from None
        missing = [t.name for t in self.inputs if not t.optional and t.name not in arrays]
        if missing:
            raise BadField(f"missing input {', '.join(map(repr, missing))}")
        return arrays

    def native(self, arrays: dict[str, np.ndarray], parameters: Mapping[str, Any]) -> Native:
        return self.module.native(arrays, parameters, self.settings)

    def answer(self, reply: Reply, explained: bool) -> list[Output]:
        if explained:
            body = reply.body.encode() if isinstance(reply.body, str) else reply.body
            return [Output(EXPLANATION_OUTPUT, "BYTES", np.array([body], dtype=object))]
        return self.module.answer(reply, self.settings)


def to_request(native: Native, request_id: str | None, explain: bool) -> Request:
    """The one place an OIP request becomes the runtime-neutral `Request` (handlers/service.py):
    the model's own body and headers, the named parts beside the body, the request id."""
    parts = dict(native.parts)
    if explain:
        parts[EXPLAIN_INPUT] = "true"
    return Request(native.body, dict(native.headers), request_id, parts)


def parameters_of(raw: Any) -> dict[str, Any]:
    """Request parameters as plain values, from REST (a dict) or gRPC (InferParameter messages,
    doubles included, which kserve's own conversion drops)."""
    out: dict[str, Any] = {}
    for key, value in dict(raw or {}).items():
        if hasattr(value, "WhichOneof"):
            kind = value.WhichOneof("parameter_choice")
            value = getattr(value, kind) if kind else None
        out[str(key)] = value
    return out
