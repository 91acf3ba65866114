"""The same request and answer on TorchServe's wire: what a TorchServe client sends for a model's
input tensors, and its reply read back as the output tensors the Open Inference Protocol answers.
The comparisons of the two runtimes (tests/integration/test_oip_torchserve.py, the image check,
the kits' tests) send both and compare the tensors; the servers use neither.

Each kit's request is built from the tensors by its own contract (`request_of`), so the wire
request carries exactly what the tensors do:

    text, tabular   {"texts": [...]}, {"records": [...]} (`request_json`)
    image           {"images": [...]}: base64 for encoded images, rows of numbers for grids
    signal          the float32 body a binary client sends, the options as its headers
"""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import numpy as np

from clients.kits import signal as signal_client
from handlers.codec import Reply
from handlers.kits.image.decode import ImageInput
from handlers.kits.image.oip import row_tensors
from handlers.kits.signal import codec as signal_codec
from handlers.kits.signal.codec import SignalInput
from handlers.kits.signal.predict import Components, Extraction
from handlers.kits.tabular.records import Answers, Records
from handlers.kits.text.codec import Classification
from handlers.kits.text.inputs import TextRequest
from handlers.tensors import Output
from oip.contract import Contract, explanation

JSON = {"Content-Type": "application/json"}

Answer = TypeVar("Answer", Classification, Answers)


@dataclass(frozen=True)
class Native:
    """A model's own request built from tensors: what a TorchServe client would have sent."""

    body: bytes | str | dict | list | None
    headers: Mapping[str, str] = field(default_factory=dict)
    parts: Mapping[str, Any] = field(default_factory=dict)
    """Named parts beside the body (as gRPC inputs are in TorchServe's row)."""


def json_body(value: Any) -> bytes:
    """A model's JSON request body, as the bytes a client sends."""
    return json.dumps(value).encode()


class Uncounted:
    """A model's settings without the limits on how many items a request holds (`request_of`
    refuses past them from the tensors' sizes, before building the request)."""

    COUNTS = ("max_texts", "max_images", "max_records")

    def __init__(self, settings: Any):
        self.settings = settings

    def __getattr__(self, name: str) -> Any:
        return sys.maxsize if name in self.COUNTS else getattr(self.settings, name)


def native(
    contract: Contract, arrays: dict[str, np.ndarray], parameters: Mapping[str, Any]
) -> Native:
    """The request's tensors as the wire request a TorchServe client sends: whatever their count
    (a client is held to no limit; the server refuses past its own)."""
    typed = contract.module.request_of(arrays, parameters, Uncounted(contract.settings))
    if isinstance(typed, TextRequest | Records):
        return Native(json_body(request_json(typed)), JSON)
    if isinstance(typed, ImageInput):
        images = [base64.b64encode(x).decode("ascii") if isinstance(x, bytes) else x
                  for x in typed.images]  # fmt: skip
        return Native(json_body({"images": images}), JSON)
    if isinstance(typed, SignalInput):
        _, headers = signal_client.request_float32(
            typed.signal, stream=typed.start, state=typed.state, band=typed.band
        )
        for value, header in (
            (typed.frequencies, signal_codec.FREQUENCIES_HEADER),
            (typed.sample_rate, signal_codec.SAMPLE_RATE_HEADER),
        ):
            if value is not None:
                headers[header] = value
        return Native(typed.signal.tobytes(), headers)
    raise TypeError(f"no wire form for {type(typed).__name__}")


def request_json(typed: TextRequest | Records) -> Any:
    """A text or tabular request as the JSON value a client sends: {"texts": [...]} or
    {"text": ...}; {"records": [...]} or the one record."""
    if isinstance(typed, TextRequest):
        return {"texts": list(typed.texts)} if typed.many else {"text": typed.texts[0]}
    return {"records": list(typed.rows)} if typed.many else typed.rows[0]


def read_answer(kind: type[Answer], body: str | bytes) -> Answer:
    """A served JSON answer of rows read back as the kit's answer (a client's view)."""
    parsed = json.loads(body)
    many = isinstance(parsed, list)
    return kind(tuple(parsed) if many else (parsed,), many)


def answer(contract: Contract, reply: Reply, explained: bool = False) -> list[Output]:
    """A TorchServe reply → the same output tensors the OIP server answers `native`'s request with."""
    if explained:
        return explanation(reply)
    kit = contract.module.__name__.split(".")[-2]
    settings = contract.settings
    if kit == "text":
        return read_answer(Classification, reply.body).to_tensors(settings.export.labels)
    if kit == "tabular":
        return read_answer(Answers, reply.body).to_tensors(settings.export.classes)
    if kit == "image":
        parsed = json.loads(reply.body)
        return row_tensors(parsed if isinstance(parsed, list) else [parsed], settings)
    if kit == "signal":
        return signal_answer(reply)
    raise TypeError(f"no wire form for the {kit} kit")


def signal_answer(reply: Reply) -> list[Output]:
    """A signal model's float32 (or JSON) reply → its output tensors."""
    body = reply.body.encode() if isinstance(reply.body, str) else reply.body
    a = signal_client.decode_answer(body, reply.headers)
    return Extraction(
        a.frequencies, Components(a.signal, a.std), None, a.state, a.samples_seen, True,
        a.sample_rate or 0, {}, a.residual, a.out_of_distribution, a.nonstationarity, a.offset,
    ).to_tensors()  # fmt: skip
