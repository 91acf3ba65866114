"""Every change this server makes to KServe's own code, in one place, for the one KServe release
they were written against (`KSERVE_VERSION`, requirements-oip.txt's pin): `check_version` refuses
to start on any other, naming both, since each change reaches into KServe's internals. Each of
`import_kserve`, `keep_binary_inputs` and `bind` says what in KServe it works around.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from handlers.errors import RequestError
from oip.edge import binary_head
from oip.refusals import refused_class, request_id_of

KSERVE_VERSION = "0.21.0"
"""The KServe release the changes below were written for and tested with."""


class KServeVersionError(RuntimeError):
    """KServe is not the release this module's changes were written for."""


def check_version(installed: str | None = None) -> None:
    """Refuse (`KServeVersionError`) unless `installed` (default: the installed kserve's) is
    `KSERVE_VERSION`."""
    if installed is None:
        try:
            installed = metadata.version("kserve")
        except metadata.PackageNotFoundError:
            installed = "(none)"
    if installed != KSERVE_VERSION:
        raise KServeVersionError(
            f"installed kserve: {installed}, expected: {KSERVE_VERSION}. oip/kserve_compat.py "
            f"changes KServe {KSERVE_VERSION}'s internals and was written for that release "
            f"only: install kserve=={KSERVE_VERSION} (requirements-oip.txt), or check each "
            "change against the installed release and update KSERVE_VERSION"
        )


def import_kserve(http_port: int, grpc_port: int, max_request_bytes: int) -> Any:
    """KServe, its release checked first, imported with sys.argv holding only its own options (it
    parses them at import)."""
    check_version()
    sys.argv = [
        sys.argv[0],
        f"--http_port={http_port}",
        f"--grpc_port={grpc_port}",
        f"--grpc_max_receive_message_length={max_request_bytes}",
    ]
    import kserve

    return kserve


def keep_binary_inputs() -> None:
    """KServe's REST decoder turns every binary BYTES input into UTF-8 text, so an encoded image
    (or any non-UTF-8 element) is a 500. Replaced by the same reading that keeps each binary
    input's raw bytes (`InferInput.as_numpy` decodes them as gRPC's are), and a malformed body is
    the client's 400."""
    from kserve.protocol.infer_type import InferInput, InferRequest, RequestedOutput

    def from_bytes(cls: Any, req_bytes: bytes, json_length: int, model_name: str) -> Any:
        Refused = refused_class()
        try:  # InferEdge has checked the same body; this is the same check, not another rule
            head, raws = binary_head(req_bytes, str(json_length))
        except RequestError as err:
            raise Refused(err, request_id_of(None, None)) from None
        inputs = []
        for spec, raw in zip(head.inputs, raws, strict=True):
            item = InferInput(spec.name, spec.shape, spec.datatype, spec.data, spec.parameters)
            item._raw_data = raw  # None: its data is in the head (binary_head: never both)
            inputs.append(item)
        return cls(
            model_name=model_name,
            request_id=head.id,
            parameters=head.parameters,
            infer_inputs=inputs,
            request_outputs=[
                RequestedOutput(name=o.name, parameters=o.parameters) for o in head.outputs
            ]
            if head.outputs is not None
            else None,
        )

    InferRequest.from_bytes = classmethod(from_bytes)


def bind(host: str, interceptors: Sequence[Any] = ()) -> None:
    """KServe binds REST to 0.0.0.0 and gRPC to [::] with no option: both listen on `host`
    instead (loopback by default, as the project's TorchServe does; a pod passes 0.0.0.0). Its gRPC
    server gets `interceptors` before its own."""
    import grpc
    import uvicorn
    from kserve.protocol.grpc import server as grpc_module
    from kserve.protocol.rest import server as rest_module

    def config(*args: Any, **kwargs: Any) -> Any:
        return uvicorn.Config(*args, **{**kwargs, "host": host})

    def server(*args: Any, **kwargs: Any) -> Any:
        kwargs["interceptors"] = (*interceptors, *kwargs.get("interceptors", ()))
        made = grpc.aio.server(*args, **kwargs)
        add = made.add_insecure_port
        made.add_insecure_port = lambda address: add(f"{host}:{address.rsplit(':', 1)[1]}")
        return made

    rest_module.uvicorn = _changed(uvicorn, Config=config)
    grpc_module.aio = _changed(grpc.aio, server=server)


def _changed(module: types.ModuleType, **changes: Any) -> types.ModuleType:
    """A copy of `module` with `changes`, for one KServe module to use in its place."""
    copy = types.ModuleType(module.__name__)
    copy.__dict__.update(module.__dict__, **changes)
    return copy
