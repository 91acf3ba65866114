#!/usr/bin/env python3
"""Kubernetes probe for a TorchServe pod.

    probe.py live     /ping answers 200
    probe.py ready    ... and every model in load_models has a READY worker (management API);
                      load_models=all: every .mar in the model store
                      a model without one is reported with its worker's last load failure
                      from model_log.log (e.g. "GPU unavailable: ..." on a GPU replica)
    probe.py live --inference http://127.0.0.1:8085 --token-file F --require URL
                      /ping through the pod proxy with a client token, and URL (HAProxy's
                      /ready: its REST and gRPC paths to TorchServe are up) answers 200

    RUNTIME=oip (the pod's switch: docs/oip.md): the Open Inference Protocol server's own health
                      routes instead, /v2/health/live for live and /v2/health/ready (every model
                      it serves is ready) for ready; through the door with the client token

/ping answers 200 before any model has loaded, so readiness also asks the management API, on
loopback, for each model's workers. In a pod TorchServe runs with token authorization off behind
the proxy (docs/kubernetes.md, threat model); where it is on (config.properties in the working
directory says so, e.g. `make serve`), the keys are read from key_file.json on every run and an
expired key is renewed once with the API key, which does not expire (POST /token?type=...).
Standard library only (with deploy/ts_files.py, the one reader of TorchServe's files): it runs
every few seconds and must start fast.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

try:  # the image puts the app on PYTHONPATH; from a checkout, the repository root is one up
    from deploy.ts_files import load_failure, log_dir, read_keys, read_properties, token_auth_on
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from deploy.ts_files import load_failure, log_dir, read_keys, read_properties, token_auth_on

WORKDIR = os.environ.get("TS_WORKDIR", "/home/model-server/work")


def read_key(workdir: Path, kind: str) -> str:
    return read_keys(workdir)[kind]


def call(url: str, key: str | None, timeout: float, method: str = "GET") -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    request = urllib.request.Request(url, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def authorized(url: str, kind: str, args: argparse.Namespace) -> tuple[int, bytes]:
    """GET url with the current `kind` key; on InvalidKeyException renew that key once and retry."""
    if args.token_file is not None:
        return call(url, args.token_file.read_text().split()[0], args.timeout)
    if not token_auth_on(args.workdir):
        return call(url, None, args.timeout)
    status, body = call(url, read_key(args.workdir, kind), args.timeout)
    if status == 400 and b"InvalidKeyException" in body:
        api_key = read_key(args.workdir, "api")
        renew, _ = call(f"{args.management}/token?type={kind}", api_key, args.timeout, "POST")
        if renew == 200:
            status, body = call(url, read_key(args.workdir, kind), args.timeout)
    return status, body


def check_ping(args: argparse.Namespace) -> str | None:
    if args.runtime == "oip":
        return check_oip(args, "/v2/health/live")
    status, body = authorized(f"{args.inference}/ping", "inference", args)
    if status != 200:
        return f"/ping answered {status}: {body[:200]!r}"
    return None


def check_oip(args: argparse.Namespace, path: str) -> str | None:
    """An OIP server's health route (the door's client token where one is given; the server
    behind the door reads none on these routes)."""
    token = args.token_file.read_text().split()[0] if args.token_file is not None else None
    status, body = call(f"{args.inference}{path}", token, args.timeout)
    if status != 200:
        return f"{path} answered {status}: {body[:200]!r}"
    return None


def loaded_models(config: dict, workdir: Path) -> list[str]:
    """The models TorchServe loads at start: load_models' list, or every archive in the store."""
    names = config.get("load_models", "").strip()
    if names.lower() == "all":
        store = workdir / config.get("model_store", "model_store")
        return sorted(p.stem for p in store.glob("*.mar"))
    return [m.strip().removesuffix(".mar") for m in names.split(",")]


def check_models(args: argparse.Namespace) -> str | None:
    config = read_properties(args.workdir / "config.properties")
    models = loaded_models(config, args.workdir)
    for model in filter(None, models):
        status, body = authorized(f"{args.management}/models/{model}", "management", args)
        if status != 200:
            return f"{model}: management API answered {status}: {body[:200]!r}"
        workers = [w.get("status") for entry in json.loads(body) for w in entry.get("workers", [])]
        if "READY" not in workers:
            # Say why, where a worker already failed to load: the readiness probe's output is
            # what `kubectl describe pod` shows (e.g. "GPU unavailable: ...", handlers/runtime.py).
            reason = load_failure(args.logs or log_dir(args.workdir), model)
            why = f"; last load failure: {reason[:300]}" if reason else ""
            return f"{model}: no READY worker yet ({workers}){why}"
    return None


def check_required(args: argparse.Namespace) -> str | None:
    for url in args.require:
        status, body = call(url, None, args.timeout)
        if status != 200:
            return f"{url} answered {status}: {body[:200]!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("check", choices=["live", "ready"])
    p.add_argument("--inference", default="http://127.0.0.1:8080", help="inference API base URL")
    p.add_argument("--management", default="http://127.0.0.1:8081", help="management API base URL")
    p.add_argument(
        "--workdir",
        type=Path,
        default=Path(WORKDIR),
        help="holds config.properties and key_file.json",
    )
    p.add_argument(
        "--token-file", type=Path, help="client token (first line) instead of the key file"
    )
    p.add_argument("--timeout", type=float, default=3.0, help="seconds per HTTP call")
    p.add_argument(
        "--runtime",
        choices=["torchserve", "oip"],
        default=os.environ.get("RUNTIME") or "torchserve",
        help="the server behind (default: $RUNTIME, as the entrypoint reads it)",
    )
    p.add_argument(
        "--logs",
        type=Path,
        help="TorchServe's log folder, for a model's load failure (default: $LOG_LOCATION, else "
        "WORKDIR/logs)",
    )
    p.add_argument(
        "--require", action="append", default=[], help="another URL that must answer 200"
    )
    args = p.parse_args(argv)
    try:
        problem = check_ping(args) or check_required(args)
        if problem is None and args.check == "ready":
            oip = args.runtime == "oip"
            problem = check_oip(args, "/v2/health/ready") if oip else check_models(args)
    except (OSError, ValueError, KeyError) as e:  # no key file yet, server not listening, bad JSON
        problem = f"{type(e).__name__}: {e}"
    if problem:
        print(f"probe {args.check}: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
