"""Every registered model over the Open Inference Protocol, REST and gRPC, on KServe's model server.

    python -m oip [--http-port 8095] [--grpc-port 8096] [--token-file PATH | --no-auth] \
        model_store/sentiment.mar model_store/frequency.mar ...   (or NAME=ARTIFACT_DIR)

Each archive (or artifact dir) is loaded as TorchServe would load it (oip/model.py); auth is a
bearer token (oip/auth.py); metrics are the handlers' own, in Prometheus format on
`--metrics-port` (oip/metrics.py). docs/oip.md has the whole server.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m oip", description=(__doc__ or "").split("\n")[0])
    p.add_argument("models", nargs="+", help="model_store/<name>.mar, or NAME=ARTIFACT_DIR")
    p.add_argument("--http-port", type=int, default=8095)
    p.add_argument("--grpc-port", type=int, default=8096)
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
        default=8097,
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
    args = parse_args(argv)
    from oip.app import serve

    serve(args)
    return 0
