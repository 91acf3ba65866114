"""The signal kit's tensor contract (handlers/tensors.py; served by oip/): one signal per request as
the FP32 input `signal` (samples); the options as request parameters (`frequencies` "1,3",
`sample_rate`, `stream` true to start a stream, `state` to continue one: or `state` as a BYTES
input; `band` false for the signals without their std band). The answer is the float32 one
TorchServe gives `Accept: application/octet-stream` clients: `signal` and `std` (frequencies x
samples) exactly as computed (no `std` output when asked without the band), and a stream's next
`state`. The tensors are read as the kit's request (`codec.SignalInput`) and the answer written
from its typed `Extraction` (`to_tensors`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from handlers.errors import BadField
from handlers.kits.signal.codec import SignalInput
from handlers.kits.signal.predict import Extraction
from handlers.kits.signal.settings import SignalSettings
from handlers.tensors import Output, Tensor, flag, texts


def inputs(settings: SignalSettings) -> tuple[Tensor, ...]:
    return (
        Tensor("signal", "FP32", (-1,)),
        Tensor("state", "BYTES", (1,), optional=True),
    )


def outputs(settings: SignalSettings) -> tuple[Tensor, ...]:
    return (
        Tensor("signal", "FP32", (-1, -1)),
        Tensor("std", "FP32", (-1, -1), optional=True),
        Tensor("frequencies", "FP64", (-1,)),
        Tensor("sample_rate", "INT64", (1,)),
        Tensor("residual", "FP64", (1,), optional=True),
        Tensor("out_of_distribution", "BOOL", (1,), optional=True),
        Tensor("nonstationarity", "FP64", (1,), optional=True),
        Tensor("offset", "FP64", (1,), optional=True),
        Tensor("state", "BYTES", (1,), optional=True),
        Tensor("samples_seen", "INT64", (1,), optional=True),
    )


def _parameter(parameters: dict[str, Any], name: str) -> str | None:
    value = parameters.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise BadField(f"parameter {name!r} must be a string or a number, not {value!r}")
    return value if isinstance(value, str) else f"{value:g}"


def request_of(
    tensors: dict[str, np.ndarray], parameters: dict[str, Any], settings: SignalSettings
) -> SignalInput:
    """The samples and options as the kit's request: what a float32 request with those headers
    carries (the model checks it as that body)."""
    state = _parameter(parameters, "state")
    if "state" in tensors:
        if state is not None:
            raise BadField('send the state once: as the "state" input or the parameter')
        [state] = texts(tensors["state"], "state")
    signal = tensors["signal"].astype("<f4", copy=False)
    band = parameters.get("band") is None or flag(parameters, "band")
    start = flag(parameters, "stream") and state is None
    frequencies = _parameter(parameters, "frequencies")
    return SignalInput(
        signal, _parameter(parameters, "sample_rate"), frequencies, start, state, band
    )


def outputs_of(answer: Extraction, settings: SignalSettings) -> list[Output]:
    return answer.to_tensors()
