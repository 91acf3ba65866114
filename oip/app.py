"""The server assembled: every model loaded (oip/loading.py, oip/model.py), the handlers' metrics
served (oip/metrics.py), KServe's app given this server's refusals (oip/refusals.py), its
changes to KServe (oip/kserve_compat.py) and the middlewares (oip/middleware.py), then KServe's
model server started on REST and gRPC."""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from oip import kserve_compat
from oip.auth import Token


def serve(args: argparse.Namespace) -> None:
    """Load every model `python -m oip`'s options name (oip/cli.py), then serve them until
    stopped."""
    token = Token(None) if args.no_auth else Token.from_file(args.token_file)
    kserve = kserve_compat.import_kserve(args.http_port, args.grpc_port, args.max_request_bytes)
    from kserve import model_server

    from oip import metrics as prometheus
    from oip.loading import load
    from oip.middleware import BodyLimit, GrpcGuard, InferEdge, OnlyTheProtocol
    from oip.model import ServedModel
    from oip.refusals import rest_refusals

    logging.basicConfig(level=logging.INFO)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="oip-models-"))
    metrics = prometheus.PrometheusMetrics() if args.metrics_port else None
    models = [
        ServedModel(name, path, token, metrics, args.gpus)
        for name, path in (load(m, work) for m in args.models)
    ]
    if metrics is not None:
        prometheus.serve(metrics, args.host, args.metrics_port)
    app = model_server.app
    rest_refusals(app)
    kserve_compat.keep_binary_inputs()
    kserve_compat.bind(args.host, interceptors=(GrpcGuard(),))
    app.add_middleware(InferEdge, token=token)
    app.add_middleware(BodyLimit, limit=args.max_request_bytes)
    app.add_middleware(OnlyTheProtocol, versions={m.name: m.version for m in models})
    kserve.ModelServer(http_port=args.http_port, grpc_port=args.grpc_port).start(models)
