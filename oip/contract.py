"""Tensors ↔ a model's own requests and answers, from the model's tensor contract (its spec's
`contract`, handlers/spec.py `TensorContract`: its kit's oip.py, or its own folder's).

A request is read from its tensors once (`request_of`) and its answer written to tensors once
(`outputs_of`), in the worker: nothing in between is serialised. Model metadata (names,
datatypes, shapes) is derived from `inputs`/`outputs` with the loaded model's settings (labels,
frequencies, image sizes), so nothing about a model is written twice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from handlers import registry
from handlers.codec import Reply
from handlers.errors import BadField, TooLarge
from handlers.service import Explained, Request
from handlers.spec import TensorContract
from handlers.tensors import Output, Tensor
from oip.edge import MAX_ELEMENTS, NUMPY

EXPLAIN_PARAMETER = "explain"
"""A request parameter `explain: true` asks for the model's explanation instead of a prediction."""

EXPLANATION_OUTPUT = "explanation"
"""An explained request answers with one BYTES tensor: the model's explanation, as JSON."""


class Contract:
    """One loaded model's tensor contract (its spec's `contract`) with its settings."""

    def __init__(self, family: str, settings: Any):
        module = registry.get(family).spec().contract  # a registered model only
        self.module: TensorContract = module
        self.settings = settings
        self.inputs: tuple[Tensor, ...] = tuple(module.inputs(settings))
        self.outputs: tuple[Tensor, ...] = tuple(module.outputs(settings))

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
            if len(item.shape) != len(spec.shape):
                raise BadField(
                    f"input {item.name!r} has shape {list(item.shape)[:8]}; this model reads "
                    f"{list(spec.shape)}"
                )
            arrays[item.name] = decode(item)
        missing = [t.name for t in self.inputs if not t.optional and t.name not in arrays]
        if missing:
            raise BadField(f"missing input {', '.join(map(repr, missing))}")
        return arrays

    def request(
        self,
        arrays: dict[str, np.ndarray],
        parameters: Mapping[str, Any],
        request_id: str | None,
        explain: bool,
    ) -> Request:
        """The one place an OIP request becomes the runtime-neutral `Request` (handlers/service.py)
        its worker answers: the kit's typed request, the explain flag, the request id."""
        typed = self.module.request_of(arrays, parameters, self.settings)
        return Request(None, {}, request_id, typed=typed, explain=explain)

    def write(self, answer: Any) -> list[Output]:
        """A typed answer (or an explanation) → its output tensors: `ModelService.handle_batch`'s
        `write`, run in the worker."""
        if isinstance(answer, Explained):
            return explanation(answer.answer.reply())
        return self.module.outputs_of(answer, self.settings)


def explanation(reply: Reply) -> list[Output]:
    """An explained request's one output: the model's explanation, as its JSON."""
    body = reply.body.encode() if isinstance(reply.body, str) else reply.body
    return [Output(EXPLANATION_OUTPUT, "BYTES", np.array([body], dtype=object))]


def decode(item: Any) -> np.ndarray:
    """One input tensor (a KServe InferInput, from any route) as an array, its elements checked
    against its datatype and shape before anything is built: JSON data element by element (BYTES
    elements strings, BOOL booleans, integers whole numbers in the datatype's range, floats
    numbers; as many as the shape holds, nested lists read row-major), binary data by its size
    (BYTES: each element's 4-byte length prefix within the bytes, no bytes left over)."""
    name, datatype = str(item.name), str(item.datatype)
    shape = [int(d) for d in item.shape]
    if len(shape) > 64 or any(d < 0 for d in shape):
        raise BadField(f"input {name!r} has shape {shape[:8]}: not a tensor's shape")
    count = math.prod(shape)
    if count > MAX_ELEMENTS:
        raise TooLarge(f"input {name!r} has {count} elements; the limit is {MAX_ELEMENTS}")
    if datatype != "BYTES" and datatype not in NUMPY:
        raise BadField(f"input {name!r}: datatype {datatype[:20]!r} is not read here")
    raw = getattr(item, "_raw_data", None)
    if raw is not None:
        if datatype == "BYTES":
            return np.array(split_bytes(bytes(raw), count, name), dtype=object).reshape(shape)
        dtype = NUMPY[datatype]
        if len(raw) != count * dtype.itemsize:
            raise BadField(
                f"input {name!r}: {len(raw)} bytes of {datatype} data; its shape {shape} takes "
                f"{count * dtype.itemsize}"
            )
        return np.frombuffer(raw, dtype=dtype).reshape(shape)
    flat = flatten(item.data, count, name, shape)
    if datatype == "BYTES":
        for i, x in enumerate(flat):
            if not isinstance(x, str | bytes):
                raise BadField(f"{name}[{i}] must be a string, not {json_kind(x)}")
        return np.array(
            [x.encode("utf-8", "surrogatepass") if isinstance(x, str) else x for x in flat],
            dtype=object,
        ).reshape(shape)
    dtype = NUMPY[datatype]
    for i, x in enumerate(flat):
        if datatype == "BOOL":
            ok = isinstance(x, bool | np.bool_)
        elif dtype.kind in "iu":
            info = np.iinfo(str(dtype))
            ok = isinstance(x, int) and not isinstance(x, bool) and info.min <= x <= info.max
        else:
            ok = isinstance(x, int | float) and not isinstance(x, bool)
        if not ok:
            raise BadField(f"{name}[{i}] must be {KIND_OF[dtype.kind]}, not {json_kind(x)}")
    return np.array(flat, dtype=dtype).reshape(shape)


KIND_OF = {"b": "true or false", "i": "a whole number in range", "u": "a whole number in range",
           "f": "a number"}  # fmt: skip


def json_kind(value: Any) -> str:
    """A value's JSON type in words (never a Python class name, nor the value itself)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer" if -(2**63) <= value < 2**64 else "an integer out of range"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str | bytes):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def flatten(data: Any, count: int, name: str, shape: list[int]) -> list[Any]:
    """JSON tensor data (flat, or nested lists read row-major) as its `count` elements; refused as
    soon as it holds more (nothing past the shape is read)."""
    if not hasattr(data, "__len__"):
        raise BadField(f"input {name!r}: data must be an array")
    out: list[Any] = []
    stack = [iter(data)]
    while stack:
        for value in stack[-1]:
            if isinstance(value, list | tuple):
                stack.append(iter(value))
                break
            out.append(value)
            if len(out) > count:
                raise BadField(f"input {name!r} holds more elements than its shape {shape} takes")
        else:
            stack.pop()
    if len(out) != count:
        raise BadField(f"input {name!r} holds {len(out)} elements; its shape {shape} takes {count}")
    return out


def split_bytes(raw: bytes, count: int, name: str) -> list[bytes]:
    """Binary BYTES data (each element a little-endian 4-byte length, then its bytes) as its
    `count` elements, each length checked against the bytes that remain."""
    out: list[bytes] = []
    offset = 0
    while offset < len(raw):
        if len(out) == count:
            raise BadField(f"input {name!r}: bytes after its {count} elements")
        if offset + 4 > len(raw):
            raise BadField(f"input {name!r}[{len(out)}]: a length prefix cut short")
        size = int.from_bytes(raw[offset : offset + 4], "little")
        offset += 4
        if size > len(raw) - offset:
            raise BadField(
                f"input {name!r}[{len(out)}]: its length prefix says {size} bytes; "
                f"{len(raw) - offset} remain"
            )
        out.append(raw[offset : offset + size])
        offset += size
    if len(out) != count:
        raise BadField(f"input {name!r} holds {len(out)} elements; its shape takes {count}")
    return out


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
