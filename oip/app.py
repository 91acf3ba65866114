"""The server assembled: every model loaded (oip/loading.py, oip/model.py), the handlers' metrics
served (oip/metrics.py), KServe's app given this server's refusals (oip/refusals.py), its
changes to KServe (oip/kserve_compat.py) and the middlewares (oip/middleware.py), then KServe's
model server started on REST and gRPC."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass
from pathlib import Path

from oip import kserve_compat
from oip.auth import Token


@dataclass(frozen=True)
class Options:
    models: list[str]
    """model_store/<name>.mar, or NAME=ARTIFACT_DIR."""
    http_port: int
    grpc_port: int
    host: str
    token: Token
    max_request_bytes: int
    metrics_port: int
    """0: no metrics."""
    gpus: int
    work_dir: Path | None
    """Where archives are unpacked (None: a new temporary folder)."""


def serve(options: Options) -> None:
    """Load every model, then serve them until stopped."""
    kserve = kserve_compat.import_kserve(
        options.http_port, options.grpc_port, options.max_request_bytes
    )
    from kserve import model_server

    from oip import metrics as prometheus
    from oip.loading import load
    from oip.middleware import BodyLimit, GrpcGuard, InferEdge, JsonByDefault, OnlyTheProtocol
    from oip.model import build_model
    from oip.refusals import rest_refusals

    logging.basicConfig(level=logging.INFO)
    work = options.work_dir or Path(tempfile.mkdtemp(prefix="oip-models-"))
    metrics = prometheus.PrometheusMetrics() if options.metrics_port else None
    models = [
        build_model(name, path, options.token, metrics, options.gpus)
        for name, path in (load(m, work) for m in options.models)
    ]
    if metrics is not None:
        prometheus.serve(metrics, options.host, options.metrics_port)
    app = model_server.app
    rest_refusals(app)
    kserve_compat.keep_binary_inputs()
    kserve_compat.bind(options.host, interceptors=(GrpcGuard(),))
    app.add_middleware(InferEdge, token=options.token)
    app.add_middleware(JsonByDefault)
    app.add_middleware(BodyLimit, limit=options.max_request_bytes)
    app.add_middleware(OnlyTheProtocol, versions={m.name: m.version for m in models})
    kserve.ModelServer(http_port=options.http_port, grpc_port=options.grpc_port).start(models)
