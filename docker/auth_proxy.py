#!/usr/bin/env python3
"""Per-pod auth proxy: one client token for every replica, TorchServe's own keys stay per replica.

TorchServe 0.12 gives each replica random keys (key_file.json) that expire, so a client cannot hold
a key that works behind a Service. This sidecar listens on the pod's REST and gRPC ports, accepts
`Authorization: Bearer <client token>` (tokens from a mounted Secret, one per line, so two can
overlap during a rotation), and forwards to TorchServe on loopback with the replica's current
inference key, renewing it with the API key when TorchServe says it expired.

    auth_proxy.py --tokens /var/run/secrets/inference/tokens [--http-port 8085] [--grpc-port 7075]
"""

from __future__ import annotations

import argparse
import hmac
import http.client
import json
import os
import threading
import urllib.parse
import urllib.request
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import grpc

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "authorization",
    "host",
    "content-length",
}
GRPC_SERVICE = "/org.pytorch.serve.grpc.inference.InferenceAPIsService/"
MAX_BODY = (
    16 * 1024 * 1024
)  # TorchServe refuses more than max_request_size itself; this caps memory


class Keys:
    """The replica's inference key, re-read from key_file.json and renewed when it expires."""

    def __init__(self, workdir: Path, management_url: str) -> None:
        self.path = workdir / "key_file.json"
        self.management_url = management_url
        self.lock = threading.Lock()

    def _read(self, kind: str) -> str:
        return json.loads(self.path.read_text())[kind]["key"]

    def inference(self) -> str:
        return self._read("inference")

    def renew(self, stale: str) -> None:
        with self.lock:
            if self.inference() != stale:  # another request already renewed it
                return
            request = urllib.request.Request(
                f"{self.management_url}/token?type=inference",
                method="POST",
                headers={"Authorization": f"Bearer {self._read('API')}"},
            )
            with urllib.request.urlopen(request, timeout=5):
                pass


class Tokens:
    """Client tokens from a file (a Secret volume: updates appear without a restart)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def accepts(self, authorization: str | None) -> bool:
        if not authorization or not authorization.startswith("Bearer "):
            return False
        given = authorization.removeprefix("Bearer ").strip().encode()
        tokens = [t.strip().encode() for t in self.path.read_text().splitlines() if t.strip()]
        return any(hmac.compare_digest(given, t) for t in tokens)


def http_handler(upstream: str, keys: Keys, tokens: Tokens) -> type[BaseHTTPRequestHandler]:
    target = urllib.parse.urlsplit(upstream)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _error(self, status: int, reason: str) -> None:
            body = json.dumps({"error": reason}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _forward(self, body: bytes | None) -> tuple[int, list[tuple[str, str]], bytes]:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            for attempt in range(2):
                key = keys.inference()
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
                try:
                    conn.request(
                        self.command, self.path, body, headers | {"Authorization": f"Bearer {key}"}
                    )
                    response = conn.getresponse()
                    data = response.read()
                finally:
                    conn.close()
                if attempt == 0 and response.status == 400 and b"InvalidKeyException" in data:
                    keys.renew(key)
                    continue
                break
            return response.status, response.getheaders(), data

        def _handle(self) -> None:
            if not tokens.accepts(self.headers.get("Authorization")):
                return self._error(401, "missing or invalid bearer token")
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                return self._error(411, "send the body with Content-Length")
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                return self._error(413, f"body over {MAX_BODY} bytes")
            body = self.rfile.read(length) if length else None
            try:
                status, headers, data = self._forward(body)
            except (OSError, http.client.HTTPException, ValueError, KeyError) as e:
                return self._error(503, f"TorchServe unavailable: {type(e).__name__}")
            self.send_response(status)
            for k, v in headers:
                if k.lower() not in HOP_BY_HOP:
                    self.send_header(k, v)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_OPTIONS = _handle  # noqa: N815

        def log_message(self, format: str, *args) -> None:  # noqa: A002
            pass  # TorchServe's access log already records every request

    return Handler


class GrpcForward(grpc.GenericRpcHandler):
    """Forwards the inference service's RPCs as raw bytes, swapping the client token for the key."""

    def __init__(self, channel: grpc.Channel, keys: Keys, tokens: Tokens) -> None:
        self.channel, self.keys, self.tokens = channel, keys, tokens

    def _metadata(self, context: grpc.ServicerContext) -> list[tuple[str, str]]:
        md = [(k, v) for k, v in context.invocation_metadata() if not k.startswith((":", "grpc-"))]
        if not self.tokens.accepts(dict(md).get("authorization")):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token")
        rest = [(k, v) for k, v in md if k not in ("authorization", "user-agent")]
        return rest + [("authorization", f"Bearer {self.keys.inference()}")]

    def service(self, details: grpc.HandlerCallDetails):
        method = details.method
        if not method.startswith(GRPC_SERVICE):
            return None  # UNIMPLEMENTED: only the inference API is exposed
        name = method.removeprefix(GRPC_SERVICE)

        def unary_unary(request: bytes, context: grpc.ServicerContext) -> bytes:
            for attempt in range(2):
                md = self._metadata(context)
                try:
                    return self.channel.unary_unary(method)(
                        request, metadata=md, timeout=context.time_remaining()
                    )
                except grpc.RpcError as e:
                    if attempt == 0 and e.code() == grpc.StatusCode.PERMISSION_DENIED:
                        self.keys.renew(dict(md)["authorization"].removeprefix("Bearer "))
                        continue
                    context.abort(e.code(), e.details() or "")

        def unary_stream(request: bytes, context: grpc.ServicerContext):
            try:
                yield from self.channel.unary_stream(method)(
                    request, metadata=self._metadata(context), timeout=context.time_remaining()
                )
            except grpc.RpcError as e:
                context.abort(e.code(), e.details() or "")

        def stream_stream(requests, context: grpc.ServicerContext):
            try:
                yield from self.channel.stream_stream(method)(
                    requests, metadata=self._metadata(context), timeout=context.time_remaining()
                )
            except grpc.RpcError as e:
                context.abort(e.code(), e.details() or "")

        if name == "StreamPredictions":
            return grpc.unary_stream_rpc_method_handler(unary_stream)
        if name == "StreamPredictions2":
            return grpc.stream_stream_rpc_method_handler(stream_stream)
        return grpc.unary_unary_rpc_method_handler(unary_unary)


def serve(args: argparse.Namespace) -> tuple[ThreadingHTTPServer, grpc.Server]:
    keys, tokens = Keys(args.workdir, args.management), Tokens(args.tokens)
    httpd = ThreadingHTTPServer(
        (args.listen, args.http_port), http_handler(args.inference, keys, tokens)
    )
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    channel = grpc.insecure_channel(args.grpc_upstream)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=args.threads))
    server.add_generic_rpc_handlers((GrpcForward(channel, keys, tokens),))
    server.add_insecure_port(f"{args.listen}:{args.grpc_port}")
    server.start()
    return httpd, server


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tokens", type=Path, required=True, help="file of accepted client tokens")
    p.add_argument("--listen", default="0.0.0.0")
    p.add_argument("--http-port", type=int, default=8085)
    p.add_argument("--grpc-port", type=int, default=7075)
    p.add_argument("--inference", default="http://127.0.0.1:8080", help="TorchServe REST inference")
    p.add_argument("--management", default="http://127.0.0.1:8081", help="for renewing the key")
    p.add_argument("--grpc-upstream", default="127.0.0.1:7070", help="TorchServe gRPC inference")
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path(os.environ.get("TS_WORKDIR", "/home/model-server/work")),
    )
    p.add_argument("--threads", type=int, default=32)
    return p.parse_args(argv)


if __name__ == "__main__":
    _, grpc_server = serve(parse_args())
    grpc_server.wait_for_termination()
