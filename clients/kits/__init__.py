"""The kits' wire contracts from the client's side, one module per kit (clients/kits/<kit>.py):
building a request body and reading an answer back. The server's side, decoding requests and
writing answers, is the kit's codec in handlers/kits/<kit>/, whose header names and types these
modules import; a served model's archive carries only that side.

    from clients import kits
    kits.of("frequency").request_float32(signal, frequencies=(1, 3))

Kits without a module here (image, tabular) are sent plain JSON bodies the tools build.
"""

from __future__ import annotations

from types import ModuleType

from clients.kits import signal, text
from handlers import registry

KITS: dict[str, ModuleType] = {"signal": signal, "text": text}
"""Each kit's client module, by the kit's name (a registry line's `kits`)."""


def of(model: str) -> ModuleType:
    """The client module of a served model's kit (a variant such as `<name>_onnx` is its
    family's); KeyError where its kit has none."""
    (kit,) = registry.get(model).kits
    if kit not in KITS:
        raise KeyError(f"the {kit} kit of {model!r} has no client module in clients/kits/")
    return KITS[kit]


__all__ = ["KITS", "of", "signal", "text"]
