"""The protocol's edge: an infer request's head checked against the Open Inference Protocol before
KServe reads it, on every route, so that a malformed field is the client's 400 (gRPC
INVALID_ARGUMENT) with the catalogue's JSON body (handlers/errors.py), never a Python exception.

REST (`InferEdge`, ASGI, inside the body limit): the token first, then the body. A JSON body
(`Content-Type: application/json`) is checked whole with `RequestHead`; a binary-extension body
(the JSON head of `Inference-Header-Content-Length` bytes, then the tensors' bytes) by `binary_head`:
the header a decimal within the body, the head a `RequestHead`, each input's data or
`binary_data_size` (one of the two), each size what its datatype and shape take (BYTES: at least
the 4-byte length prefixes) and the sizes adding up to the bytes after the head.

gRPC (`grpc_infer_problem`): raw contents one per input, never beside an input's own contents.

What is checked here is priced from what the request declares: nothing is decoded or allocated
beyond the (bounded) body itself. Each tensor's elements are read by oip/contract.py's `decode`,
which checks them against the datatype and shape before building any array.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, ValidationError

from handlers.errors import BadEncoding, BadField, RequestError, TooLarge

Parameter = StrictBool | StrictInt | StrictFloat | str
"""A request, input or output parameter's value (the protocol's $parameter)."""

MAX_ELEMENTS = 1 << 22
"""Elements of one input tensor past which a request is refused before it is read (the body
limit bounds the bytes; this bounds a shape that claims more than the body holds)."""

NUMPY = {
    "BOOL": np.dtype(np.bool_), "UINT8": np.dtype("<u1"), "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"), "UINT64": np.dtype("<u8"), "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"), "INT32": np.dtype("<i4"), "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"), "FP32": np.dtype("<f4"), "FP64": np.dtype("<f8"),
}  # fmt: skip
"""Each fixed-size datatype's array type (binary data is little-endian, as the protocol says)."""

DATATYPES = (*NUMPY, "BYTES")
"""The datatypes this server reads (the protocol's, BF16 aside: numpy has none)."""


class _Strict(BaseModel):
    """JSON types as the protocol writes them: no number read from a string, no bool as a number."""

    model_config = ConfigDict(strict=True)


class InputHead(_Strict):
    name: str
    shape: list[int]
    datatype: str
    parameters: dict[str, Parameter] | None = None
    data: list[Any] | None = None


class OutputHead(_Strict):
    name: str
    parameters: dict[str, Parameter] | None = None


class RequestHead(_Strict):
    """$inference_request, the request id a string (the protocol's)."""

    id: str | None = None
    parameters: dict[str, Parameter] | None = None
    inputs: list[InputHead]
    outputs: list[OutputHead] | None = None


def parse_head(raw: bytes) -> RequestHead:
    """`raw` as a `RequestHead`, or the RequestError naming the first field that is not one."""
    try:
        return RequestHead.model_validate_json(raw)
    except ValidationError as e:
        first = e.errors(include_url=False, include_context=False, include_input=False)[0]
        if first["type"] == "json_invalid":
            raise BadEncoding("the request head is not valid JSON") from None
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        where = where.lstrip(".") or "the request"
        raise BadField(f"{where}: {str(first['msg']).lower()}"[:300]) from None


def elements(spec: InputHead) -> int:
    """The element count `spec`'s shape declares, refused when over `MAX_ELEMENTS`."""
    if any(d < 0 for d in spec.shape):
        raise BadField(f"input {spec.name!r} has shape {spec.shape}: dimensions are not negative")
    count = math.prod(spec.shape) if len(spec.shape) <= 64 else MAX_ELEMENTS + 1
    if count > MAX_ELEMENTS:
        raise TooLarge(f"input {spec.name!r} has more than {MAX_ELEMENTS} elements")
    return count


def check_head(head: RequestHead, binary: bool) -> list[int | None]:
    """The head's inputs checked; → each input's binary_data_size (None: its data is in JSON)."""
    sizes: list[int | None] = []
    for spec in head.inputs:
        if spec.datatype not in DATATYPES:
            raise BadField(f"input {spec.name!r}: datatype {spec.datatype[:20]!r} is not read here")
        count = elements(spec)
        size = (spec.parameters or {}).get("binary_data_size")
        if size is None:
            if spec.data is None:
                raise BadField(f"input {spec.name!r} has neither data nor binary_data_size")
            if spec.datatype == "FP16":
                raise BadField(f"input {spec.name!r}: FP16 data travels as binary data only")
            sizes.append(None)
            continue
        if not binary:
            raise BadField(f"input {spec.name!r}: binary_data_size in a JSON request")
        if spec.data is not None:
            raise BadField(f"input {spec.name!r} has both data and binary_data_size")
        if type(size) is not int or size < 0:
            raise BadField(f"input {spec.name!r}: binary_data_size must be a whole number of bytes")
        # BYTES: each element a 4-byte length prefix, then its bytes
        least = count * (4 if spec.datatype == "BYTES" else NUMPY[spec.datatype].itemsize)
        if size < least or (spec.datatype != "BYTES" and size != least):
            raise BadField(
                f"input {spec.name!r}: binary_data_size {size} for {count} {spec.datatype} "
                f"elements ({'at least ' if spec.datatype == 'BYTES' else ''}{least} bytes)"
            )
        sizes.append(size)
    return sizes


def binary_head(body: bytes, header: str | None) -> tuple[RequestHead, list[bytes | None]]:
    """A binary-extension body → its head and each input's bytes (None: data in the head)."""
    if header is None:
        raise BadField(
            "binary tensors need the Inference-Header-Content-Length header (JSON requests: "
            "Content-Type: application/json)"
        )
    text = header.strip()
    if not text.isdigit() or not text.isascii() or len(text) > 12:
        raise BadField("Inference-Header-Content-Length must be a number of bytes")
    length = int(text)
    if length > len(body):
        raise BadField(
            f"Inference-Header-Content-Length {length} is past the body ({len(body)} bytes)"
        )
    head = parse_head(body[:length])
    sizes = check_head(head, binary=True)
    declared = sum(s for s in sizes if s is not None)
    if declared != len(body) - length:
        raise BadField(
            f"the inputs' binary_data_size add up to {declared} bytes; {len(body) - length} follow "
            "the head"
        )
    raws: list[bytes | None] = []
    start = length
    for size in sizes:
        raws.append(None if size is None else body[start : start + size])
        start += size or 0
    return head, raws


def check_rest(body: bytes, headers: dict[str, str]) -> RequestHead:
    """An infer POST's body checked for the route its Content-Type picks (as FastAPI picks it:
    JSON for application/json or +json, the binary extension otherwise)."""
    media = headers.get("content-type", "").split(";")[0].strip().lower()
    if media == "application/json" or media.endswith("+json"):
        head = parse_head(body)
        check_head(head, binary=False)
        return head
    head, _ = binary_head(body, headers.get("inference-header-content-length"))
    return head


def grpc_infer_problem(request: Any) -> RequestError | None:
    """A ModelInferRequest's datatypes, and its raw contents against its inputs (KServe would
    index past them)."""
    for tensor in request.inputs:  # KServe's own reading refuses others without the JSON body
        if tensor.datatype not in DATATYPES:
            return BadField(
                f"input {tensor.name[:40]!r}: datatype {tensor.datatype[:20]!r} is not read here"
            )
    raw = len(request.raw_input_contents)
    if raw and raw != len(request.inputs):
        return BadField(f"{raw} raw_input_contents for {len(request.inputs)} inputs")
    if raw and any(t.HasField("contents") for t in request.inputs):
        return BadField("an input has contents beside raw_input_contents: send one or the other")
    return None
