"""Every registered model over the Open Inference Protocol, REST and gRPC, on KServe's model server.

    python -m oip [--http-port 8095] [--grpc-port 8096] [--token-file PATH | --no-auth] \
        model_store/sentiment.mar model_store/frequency.mar ...   (or NAME=ARTIFACT_DIR)

Each archive (or artifact dir) is loaded as TorchServe would load it: its model-config.yaml gives
the serving settings (`handler:`), the batch size and delay, the workers and the queue size
(oip/batcher.py). A request's tensors become the model's own request (oip/contract.py) and its
answer comes from the same `ModelService` TorchServe runs.

Per-request status: a refused request raises `Refused`, which answers REST with the model's own
status and `{"error", "kind"}` body (Retry-After on 503), and gRPC with its own status code and
the same JSON as details; its batch neighbours are answered.

Metrics: the handlers' own (handlers/telemetry.py: batches, stage latencies, refusals by kind,
predictions, uncertainty) in Prometheus format on `--metrics-port` (oip/metrics.py), under the
names TorchServe's metrics listener gives them; refusals of a request's tensors, before the model
sees it, are counted as the model's own are.

Auth: inference needs `Authorization: Bearer <token>` (gRPC: `authorization` metadata), the
token read from --token-file, which is written (0600, random) when it does not exist; health and
metadata routes are open, as a generic client reads them first. --no-auth is for a pod whose door
authenticates.
"""

from __future__ import annotations

import argparse
import functools
import hmac
import json
import logging
import re
import secrets
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

from handlers.archive import ArchiveConfig, unpack
from handlers.errors import (
    KINDS,
    REQUEST_ID_HEADER,
    BadEncoding,
    BadField,
    BodyTooLarge,
    RequestError,
    Unauthorized,
    echo,
    error_body,
    valid_request_id,
)
from handlers.manifest import read_manifest
from handlers.service import ModelService
from handlers.telemetry import Telemetry
from handlers.tensors import flag
from oip.batcher import Batcher
from oip.contract import (
    EXPLAIN_PARAMETER,
    EXPLANATION_OUTPUT,
    Contract,
    parameters_of,
    to_request,
)
from oip.edge import binary_head, check_rest, grpc_infer_problem

log = logging.getLogger(__name__)

DEFAULT_HTTP_PORT = 8095
DEFAULT_GRPC_PORT = 8096
DEFAULT_METRICS_PORT = 8097


def grpc_code(err: RequestError) -> Any:
    """The gRPC status of a refusal: the catalogue's (handlers/errors.KINDS) for its kind and the
    HTTP status it is answered with, never a mapping of this server's own."""
    from grpc import StatusCode

    return StatusCode[KINDS[err.kind].grpc_for(err.status)]


@functools.cache
def _refused_class() -> type:
    from grpc_interceptor.exceptions import GrpcException

    class Refused(GrpcException):
        """One request's refusal: REST status + JSON body, or gRPC status + the JSON as details."""

        def __init__(self, err: RequestError, request_id: str | None = None):
            super().__init__(json.dumps(err.to_body(request_id)), grpc_code(err))
            self.error = err
            self.request_id = request_id

    return Refused


class Token:
    """The client tokens inference needs: any one of them (a Secret holds one a line, two during a
    rotation, as the pod's door reads it); none at all: no check (--no-auth)."""

    def __init__(self, value: str | None | tuple[str, ...]):
        self.values: tuple[str, ...] | None = (value,) if isinstance(value, str) else value

    @property
    def value(self) -> str | None:
        """The first token (the one `make serve-oip` writes and clients read)."""
        return self.values[0] if self.values else None

    @classmethod
    def from_file(cls, path: Path) -> Token:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(24) + "\n")
        tokens = tuple(line.strip() for line in path.read_text().splitlines() if line.strip())
        if not tokens:
            raise SystemExit(f"{path}: no token in it (one a line)")
        return cls(tokens)

    def check(self, headers: dict[str, str] | None) -> None:
        if self.values is None:
            return
        given = next((v for k, v in (headers or {}).items() if k.lower() == "authorization"), None)
        scheme, _, token = (given or "").partition(" ")
        sent = token.strip().encode()
        # Every token compared (no early exit): the time taken says nothing about which matched.
        matches = [hmac.compare_digest(sent, t.encode()) for t in self.values]
        if scheme.lower() != "bearer" or not any(matches):
            raise Unauthorized(
                "missing or wrong token: send 'Authorization: Bearer <token>' (the server's "
                "--token-file)"
            )


def load(source: str, work: Path) -> tuple[str, Path]:
    """NAME=PATH or PATH; a .mar is unpacked into `work`. → (served name, model dir)."""
    name, _, path_text = source.rpartition("=") if "=" in source else ("", "", source)
    path = Path(path_text)
    if path.suffix == ".mar":
        name = name or path.stem
        path = unpack(path, work / name)
    if not name:
        name = str(read_manifest(path).get("model", path.name))
    return name, path


def worker_devices(workers: int, gpus: int, environ: dict | None = None) -> list[str]:
    """Each worker's device, as TorchServe hands them out: worker i gets GPU i % gpus
    (config.properties' number_of_gpu), none without GPUs; handlers.runtime decides what that GPU
    is (cuda:i where torch sees it, else the CPU, said in the log; with TS_REQUIRE_GPU=1 anything
    but a usable CUDA device is an ArchiveError: the server does not start, saying why)."""
    from handlers.runtime import device_from_properties

    return [
        device_from_properties({"gpu_id": i % gpus} if gpus > 0 else {}, environ)
        for i in range(workers)
    ]


def build_model(
    name: str, model_dir: Path, token: Token, metrics: Any = None, gpus: int = 0
) -> Any:
    """The KServe `Model` serving one archive; `metrics`: the handlers' Telemetry sink
    (oip/metrics.PrometheusMetrics), None: no metrics; `gpus`: GPUs to spread workers over."""
    import kserve
    from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

    Refused = _refused_class()
    archive = ArchiveConfig.read(model_dir)
    workers = archive.min_workers
    telemetry = Telemetry(metrics, name)
    services = [
        ModelService.from_dir(
            model_dir,
            name=name,
            config=dict(archive.handler),
            device=device,
            telemetry=telemetry,
        )
        for device in worker_devices(workers, gpus)
    ]
    contract = Contract(str(read_manifest(model_dir).get("model", name)), services[0].settings)
    batcher = Batcher(
        services,
        batch_size=archive.batch_size,
        max_delay_s=archive.max_batch_delay_ms / 1000.0,
        queue_size=archive.job_queue_size,
    )
    version = str(getattr(services[0].settings, "version", "") or "")

    class ServedModel(kserve.Model):
        def __init__(self) -> None:
            super().__init__(name)
            self.contract = contract
            self.batcher = batcher
            self.version = version
            self.ready = True

        def load(self) -> bool:
            return True

        def get_input_types(self) -> list[dict]:
            return [t.metadata() for t in contract.inputs]

        def get_output_types(self) -> list[dict]:
            return [t.metadata() for t in contract.outputs]

        async def predict(
            self,
            payload: InferRequest,
            headers: dict[str, str] | None = None,
            response_headers: dict[str, str] | None = None,
        ) -> InferResponse:
            request_id = request_id_of(payload.id, headers)
            try:
                token.check(headers)
                if not isinstance(payload, InferRequest):  # a v1 body
                    raise BadField(f"this server speaks v2: POST /v2/models/{name}/infer")
                wanted = {o.name: o for o in payload.request_outputs or []}
                unknown = sorted(
                    set(wanted) - {t.name for t in contract.outputs} - {EXPLANATION_OUTPUT}
                )
                if unknown:
                    raise BadField(f"unknown output {', '.join(map(repr, unknown))}")
                parameters = parameters_of(payload.parameters)
                explain = flag(parameters, EXPLAIN_PARAMETER)
                arrays = contract.read_inputs(list(payload.inputs))
                request = to_request(contract.native(arrays, parameters), request_id, explain)
            except Unauthorized as err:
                raise Refused(err, request_id) from None
            except RequestError as err:  # the tensors' refusal: counted as the model's own are
                telemetry.refused_error(err, request_id)
                raise Refused(err, request_id) from None
            result = await batcher.submit(request)
            if isinstance(result, RequestError):
                raise Refused(result, request_id)
            outputs = contract.answer(result, explain)
            infer_outputs = []
            for out in outputs:
                if wanted and out.name not in wanted:
                    continue
                binary = payload.use_binary_outputs
                # REST: an output may ask for binary data; gRPC: raw outputs iff raw inputs.
                rest = not payload.from_grpc
                if rest and out.name in wanted and wanted[out.name].binary_data is not None:
                    binary = bool(wanted[out.name].binary_data)
                tensor = InferOutput(out.name, list(out.data.shape), out.datatype)
                tensor.set_data_from_numpy(out.data, binary_data=binary)
                infer_outputs.append(tensor)
            return InferResponse(
                response_id=payload.id or request_id,
                model_name=name,
                infer_outputs=infer_outputs,
                model_version=version or None,
                use_binary_outputs=payload.use_binary_outputs,
            )

    return ServedModel()


def _rest_refusals(app: Any) -> None:
    from fastapi.responses import JSONResponse

    Refused = _refused_class()

    async def refused(_: Any, exc: Any) -> JSONResponse:
        err: RequestError | None = getattr(exc, "error", None)
        if err is None:  # a gRPC-only exception from elsewhere: KServe's generic answer
            return JSONResponse({"error": str(exc)}, status_code=500)
        request_id = getattr(exc, "request_id", None)
        headers = {"Retry-After": str(err.retry_after_s)} if err.retry_after_s is not None else {}
        if err.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        if request_id is not None:
            headers[REQUEST_ID_HEADER] = request_id
        return JSONResponse(err.to_body(request_id), status_code=err.status, headers=headers)

    # Starlette finds a handler by the exception's classes: every Refused is one GrpcException.
    app.add_exception_handler(Refused.__mro__[1], refused)

    from fastapi.exceptions import RequestValidationError

    async def invalid(request: Any, exc: Any) -> JSONResponse:
        """KServe's pydantic models refuse a request of the wrong shape (a null parameter, a
        string where a number goes) with FastAPI's 422 {"detail": [...]}: the protocol's 400 and
        error shape instead, naming the first place."""
        first = (exc.errors() or [{}])[0]
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        err = BadField(f"{where}: {str(first.get('msg', 'invalid')).lower()}"[:300])
        request_id = request_id_of(None, dict(request.headers))
        return JSONResponse(
            err.to_body(request_id), status_code=err.status,
            headers={REQUEST_ID_HEADER: request_id},
        )  # fmt: skip

    app.add_exception_handler(RequestValidationError, invalid)

    from fastapi.exception_handlers import http_exception_handler
    from starlette.exceptions import HTTPException

    async def unparsed(request: Any, exc: Any) -> Any:
        """FastAPI answers a body it cannot parse (JSON declared, not sent) with 400
        {"detail": ...}: the protocol's error shape instead; other statuses as Starlette does."""
        if exc.status_code != 400:
            return await http_exception_handler(request, exc)
        err = BadEncoding(f"the body is not the JSON it says it is: {str(exc.detail).lower()}")
        request_id = request_id_of(None, dict(request.headers))
        return JSONResponse(
            err.to_body(request_id), status_code=400, headers={REQUEST_ID_HEADER: request_id}
        )

    app.add_exception_handler(HTTPException, unparsed)


def _keep_binary_inputs() -> None:
    """KServe 0.21's REST decoder turns every binary BYTES input into UTF-8 text, so an encoded
    image (or any non-UTF-8 element) is a 500. Replaced by the same reading that keeps each binary
    input's raw bytes (`InferInput.as_numpy` decodes them as gRPC's are), and a malformed body is
    the client's 400."""
    from kserve.protocol.infer_type import InferInput, InferRequest, RequestedOutput

    def from_bytes(cls: Any, req_bytes: bytes, json_length: int, model_name: str) -> Any:
        Refused = _refused_class()
        try:  # InferEdge has checked the same body; this is the same check, not another rule
            head, raws = binary_head(req_bytes, str(json_length))
        except RequestError as err:
            raise Refused(err, request_id_of(None, None)) from None
        inputs = []
        for spec, raw in zip(head.inputs, raws, strict=True):
            item = InferInput(spec.name, spec.shape, spec.datatype, parameters=spec.parameters)
            if raw is None:
                item.data = spec.data
            else:
                item._raw_data = raw
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


def _bind(host: str) -> None:
    """KServe 0.21 binds REST to 0.0.0.0 and gRPC to [::] with no option: both listen on `host`
    instead (loopback by default, as the project's TorchServe does; a pod passes 0.0.0.0)."""
    import types

    import grpc
    import uvicorn
    from kserve.protocol.grpc import server as grpc_module
    from kserve.protocol.rest import server as rest_module

    class Config(uvicorn.Config):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs["host"] = host
            super().__init__(*args, **kwargs)

    rest_proxy = types.ModuleType("uvicorn")
    rest_proxy.__dict__.update(uvicorn.__dict__)
    rest_proxy.Config = Config  # type: ignore[attr-defined]
    rest_module.uvicorn = rest_proxy

    def server(*args: Any, **kwargs: Any) -> Any:
        kwargs["interceptors"] = (OnlyTheProtocol(), *kwargs.get("interceptors", ()))
        made = grpc.aio.server(*args, **kwargs)
        add = made.add_insecure_port
        made.add_insecure_port = lambda address: add(f"{host}:{address.rsplit(':', 1)[1]}")
        return made

    class OnlyTheProtocol(grpc.aio.ServerInterceptor):
        """The model repository RPCs (load, unload) are not served: a client could unload a model."""

        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            if details.method.rsplit("/", 1)[-1] in DENIED_RPCS:

                async def deny(request: Any, context: Any) -> None:
                    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "not served here")

                return grpc.unary_unary_rpc_method_handler(deny)
            handler = await continuation(details)
            if handler is None or handler.unary_unary is None or not handler.request_deserializer:
                return handler
            return _decoded_or_invalid(handler, details.method.rsplit("/", 1)[-1])

    def _decoded_or_invalid(handler: Any, method: str) -> Any:
        """A message that does not decode is the client's INVALID_ARGUMENT (gRPC itself answers
        UNKNOWN with the parser's exception), with the refusals' JSON as its details."""
        decode, behaviour = handler.request_deserializer, handler.unary_unary
        undecodable = object()

        def lenient(raw: bytes) -> Any:
            try:
                return decode(raw)
            except Exception:  # protobuf's DecodeError, or anything its parser raises
                return undecodable

        async def checked(request: Any, context: Any) -> Any:
            if request is undecodable:
                err = BadEncoding("the message does not decode as this RPC's request")
                await context.abort(grpc_code(err), json.dumps(err.to_body()))
            problem = grpc_infer_problem(request) if method == "ModelInfer" else None
            if problem is not None:
                request_id = request_id_of(request.id, dict(context.invocation_metadata() or ()))
                await context.abort(grpc_code(problem), json.dumps(problem.to_body(request_id)))
            return await behaviour(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked,
            request_deserializer=lenient,
            response_serializer=handler.response_serializer,
        )

    grpc_proxy = types.ModuleType("grpc.aio")
    grpc_proxy.__dict__.update(grpc.aio.__dict__)
    grpc_proxy.server = server  # type: ignore[attr-defined]
    grpc_module.aio = grpc_proxy


class BodyLimit:
    """ASGI middleware: a request body over `limit` bytes is refused with 413 before it is read
    whole (TorchServe's max_request_size; gRPC's own limit is the same number)."""

    def __init__(self, app: Any, limit: int):
        self.app = app
        self.limit = limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, send)
            return
        seen = 0
        refused = False

        async def bounded() -> dict:
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message.get("type") == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:  # a body without Content-Length (chunked) that runs over
                    refused = True
                    await self._refuse(scope, send)
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: dict) -> None:
            if not refused:  # once refused, the app's own answer (to the disconnect) is dropped
                await send(message)

        await self.app(scope, bounded, guarded)

    def _error(self) -> RequestError:
        return BodyTooLarge(f"the request body is over {self.limit} bytes")

    async def _refuse(self, scope: dict, send: Any) -> None:
        request_id = scope_request_id(scope)
        await send_json(send, 413, self._error().to_body(request_id), request_id)


INFER = re.compile(r"/v2/models/[^/]+/infer/?")


class InferEdge:
    """ASGI middleware, inside the body limit: an infer POST's token, then its body checked
    against the protocol (oip/edge.py: field types, the binary extension's header and sizes, each
    tensor's size against its datatype and shape) before KServe reads it; a malformed request is
    the client's 400 (or 413) with the catalogue's JSON body. The body is then handed on as sent."""

    def __init__(self, app: Any, token: Token):
        self.app = app
        self.token = token

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if (
            scope.get("type") != "http"
            or scope.get("method") != "POST"
            or not INFER.fullmatch(scope.get("path", ""))
        ):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        chunks = []
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                return  # the client went away (or the body limit refused it)
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            self.token.check(headers)
            check_rest(body, headers)
        except RequestError as err:
            request_id = request_id_of(None, headers)
            extra = {"WWW-Authenticate": "Bearer"} if err.status == 401 else {}
            await send_json(send, err.status, err.to_body(request_id), request_id, extra)
            return
        delivered = False

        async def replay() -> dict:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


def request_id_of(given: Any, headers: dict[str, str] | None) -> str:
    """A request's id, by TorchServe's path's rule (handlers/errors.REQUEST_ID_PATTERN): the
    request's own `id` when acceptable, else the client's X-Request-ID (REST header or gRPC
    metadata), else a new one. It goes to the model's log lines and every error body."""
    header = next(
        (v for k, v in (headers or {}).items() if k.lower() == REQUEST_ID_HEADER.lower()), None
    )
    return valid_request_id(given) or valid_request_id(header) or str(uuid.uuid4())


def scope_request_id(scope: dict) -> str:
    """The request id of an ASGI request answered before KServe reads its body."""
    headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
    return request_id_of(None, headers)


async def send_json(
    send: Any,
    status: int,
    payload: dict,
    request_id: str | None = None,
    extra: dict[str, str] | None = None,
) -> None:
    """An ASGI answer with a JSON body, written before KServe's app sees the request."""
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    headers += [(k.lower().encode(), v.encode()) for k, v in (extra or {}).items()]
    if request_id is not None:
        headers.append((REQUEST_ID_HEADER.lower().encode(), request_id.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


DENIED_RPCS = {"RepositoryModelLoad", "RepositoryModelUnload"}

ROUTES = re.compile(
    r"(GET /v2(/health/(live|ready))?"
    r"|GET /v2/models/[^/]+(/versions/[^/]+)?(/ready)?"
    r"|POST /v2/models/[^/]+(/versions/[^/]+)?/infer)"
)
"""The protocol's health, metadata and inference routes: all REST serves. KServe's app also has
v1 routes, /metrics, /docs and the model repository (POST .../unload would take a model away)."""


def kserve_routes() -> list[tuple[str, str]]:
    """(method, path template) of every route KServe 0.21's REST app registers (its root and
    /metrics, v1, v2 with the model repository, FastAPI's docs): the surface `ROUTES` narrows to
    the protocol's. For the surface tests; imports KServe (the OIP venv)."""
    from unittest import mock

    from fastapi import FastAPI
    from kserve.protocol.rest.v1_endpoints import register_v1_endpoints
    from kserve.protocol.rest.v2_endpoints import register_v2_endpoints

    app = FastAPI()
    plane, repository = mock.MagicMock(), mock.MagicMock()
    register_v1_endpoints(app, plane, repository)
    register_v2_endpoints(app, plane, repository)
    found = {("GET", "/"), ("GET", "/metrics")}

    def walk(routes: Any, prefix: str) -> None:
        for route in routes:
            inner = getattr(route, "original_router", None)  # FastAPI's included router
            if inner is not None:
                context = getattr(route, "include_context", None)
                walk(inner.routes, prefix + str(getattr(context, "prefix", "") or ""))
                continue
            for method in sorted(getattr(route, "methods", None) or ()):
                found.add((method, prefix + getattr(route, "path", "")))

    walk(app.routes, "")
    return sorted(found)


VERSIONED = re.compile(r"/v2/models/([^/]+)/versions/([^/]+)(/ready|/infer)?/?")


class OnlyTheProtocol:
    """ASGI middleware: anything but `ROUTES` is 404 before KServe sees it. A versioned route
    (`/v2/models/<m>/versions/<v>[/ready|/infer]`, which KServe 0.21 answers with a 500-class
    NotImplementedError) is the model's own route when <v> is the version it serves, else 404."""

    def __init__(self, app: Any, versions: dict[str, str] | None = None):
        self.app = app
        self.versions = versions or {}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            path = scope.get("path", "")
            if not ROUTES.fullmatch(f"{scope.get('method')} {path.rstrip('/') or '/'}"):
                await self._not_found(scope, send, "not found")
                return
            if versioned := VERSIONED.fullmatch(path):
                name, version, rest = versioned.groups()
                served = self.versions.get(name)
                if served is None or version != served:
                    await self._not_found(
                        scope,
                        send,
                        f"model {echo(name)} is not served"
                        if served is None
                        else f"model {name!r} has no version {echo(version)}: it serves "
                        + (f"version {served!r}" if served else "no named version"),
                    )
                    return
                own = f"/v2/models/{name}{rest or ''}"  # the model's own route
                scope = {**scope, "path": own, "raw_path": own.encode()}
        await self.app(scope, receive, send)

    @staticmethod
    async def _not_found(scope: dict, send: Any, reason: str) -> None:
        request_id = scope_request_id(scope)
        await send_json(send, 404, error_body(reason, "not_found", request_id), request_id)


class JsonByDefault:
    """ASGI middleware: an infer POST with no Content-Type and no binary tensors
    (Inference-Header-Content-Length) is JSON. tritonclient's HTTP client sends plain JSON
    requests without a Content-Type, which KServe would otherwise read as binary and refuse."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and scope.get("method") == "POST":
            names = {k.lower() for k, _ in scope.get("headers", [])}
            if b"content-type" not in names and b"inference-header-content-length" not in names:
                scope = dict(scope)
                scope["headers"] = [
                    *scope.get("headers", []),
                    (b"content-type", b"application/json"),
                ]
        await self.app(scope, receive, send)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m oip", description=__doc__.split("\n")[0])
    p.add_argument("models", nargs="+", help="model_store/<name>.mar, or NAME=ARTIFACT_DIR")
    p.add_argument("--http-port", type=int, default=DEFAULT_HTTP_PORT)
    p.add_argument("--grpc-port", type=int, default=DEFAULT_GRPC_PORT)
    p.add_argument(
        "--host", default="127.0.0.1", help="the address both listen on (a pod: 0.0.0.0)"
    )
    auth = p.add_mutually_exclusive_group()
    auth.add_argument("--token-file", type=Path, default=Path("oip_token"))
    auth.add_argument("--no-auth", action="store_true", help="no token (a door authenticates)")
    p.add_argument(
        "--max-request-bytes",
        type=int,
        default=1 << 20,
        help="bodies over this are refused (413, gRPC RESOURCE_EXHAUSTED): config.properties' max_request_size",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="the handlers' Prometheus metrics on http://HOST:PORT/metrics (0: none)",
    )
    p.add_argument(
        "--gpus",
        type=int,
        default=0,
        help="GPUs to spread each model's workers over (config.properties' number_of_gpu)",
    )
    p.add_argument("--work-dir", type=Path, default=None, help="where archives are unpacked")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # kserve parses sys.argv when imported: it must see only its own options.
    sys.argv = [
        sys.argv[0],
        f"--http_port={args.http_port}",
        f"--grpc_port={args.grpc_port}",
        f"--grpc_max_receive_message_length={args.max_request_bytes}",
    ]
    import kserve
    from kserve import model_server

    logging.basicConfig(level=logging.INFO)
    token = Token(None) if args.no_auth else Token.from_file(args.token_file)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="oip-models-"))
    from oip.metrics import PrometheusMetrics, serve

    metrics = PrometheusMetrics() if args.metrics_port else None
    models = [
        build_model(name, path, token, metrics, args.gpus)
        for name, path in (load(m, work) for m in args.models)
    ]
    if metrics is not None:
        serve(metrics, args.host, args.metrics_port)
    _rest_refusals(model_server.app)
    _keep_binary_inputs()
    _bind(args.host)
    model_server.app.add_middleware(InferEdge, token=token)
    model_server.app.add_middleware(JsonByDefault)
    model_server.app.add_middleware(BodyLimit, limit=args.max_request_bytes)
    model_server.app.add_middleware(OnlyTheProtocol, versions={m.name: m.version for m in models})
    kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port).start(models)
    return 0
