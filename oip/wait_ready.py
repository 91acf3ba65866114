"""python -m oip.wait_ready URL MODEL... [--timeout S]: wait until the OIP server at URL says
every MODEL is ready (GET /v2/models/<m>/ready), or fail naming those that are not. Stdlib only."""

from __future__ import annotations

import argparse
import sys
import time
import urllib.error
import urllib.request


def ready(url: str, model: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/v2/models/{model}/ready", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError):
        return False


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m oip.wait_ready")
    p.add_argument("url")
    p.add_argument("models", nargs="+")
    p.add_argument("--timeout", type=float, default=300.0)
    args = p.parse_args(argv)
    deadline = time.monotonic() + args.timeout
    waiting = list(args.models)
    while waiting and time.monotonic() < deadline:
        waiting = [m for m in waiting if not ready(args.url, m)]
        if waiting:
            time.sleep(0.5)
    if waiting:
        print(f"not ready after {args.timeout:g} s: {', '.join(waiting)}", file=sys.stderr)
        return 1
    print(f"ready at {args.url}: {', '.join(args.models)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
