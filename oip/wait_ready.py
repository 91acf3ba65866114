"""python -m oip.wait_ready URL [MODEL...] [--timeout S]: wait until the OIP server at URL says
every MODEL is ready (GET /v2/models/<m>/ready), or, with no MODEL, that the server is ready (GET
/v2/health/ready: every model it serves is; a pod's probe), or fail naming what is not. Stdlib
only."""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request

SERVER = "the server"


def ready(url: str, model: str) -> bool:
    path = "/v2/health/ready" if model == SERVER else f"/v2/models/{model}/ready"
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m oip.wait_ready")
    p.add_argument("url")
    p.add_argument("models", nargs="*")
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    waiting = list(args.models) or [SERVER]
    while waiting and time.monotonic() < deadline:
        waiting = [m for m in waiting if not ready(args.url, m)]
        if waiting:
            time.sleep(0.5)
    if waiting:
        print(f"not ready after {args.timeout:g} s: {', '.join(waiting)}", file=sys.stderr)
        return 1
    print(f"ready at {args.url}: {', '.join(args.models) or SERVER}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
