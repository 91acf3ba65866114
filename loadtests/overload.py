"""Mixed load on one model (issue: overload must shed, not queue): three quarters of the users send
a short request, a quarter the largest valid one (the model's overload case, tools/<model>/
overload.py: `OVERLOAD.small` and `OVERLOAD.large(handler settings)`), back to back (after a 503, as
Retry-After says). Every answer (status 0: client
timeout; -1: still unanswered when the run stopped, with its age) is written to OVERLOAD_OUT as JSON
lines; `python -m reliability.overload` runs and judges it.

    OVERLOAD_MODEL=MODEL OVERLOAD_TOKEN=... OVERLOAD_OUT=reports/overload.jsonl \\
    locust -f loadtests/overload.py --headless -u 64 -r 64 -t 30s

Environment: OVERLOAD_MODEL (default: the first registered model with an overload hook),
OVERLOAD_URL (default http://127.0.0.1:8080/predictions/<model>), OVERLOAD_HANDLER (the served
handler settings as JSON, which size the largest request; default: the hook's defaults),
OVERLOAD_TIMEOUT_S (the clients' patience, default 30).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # locust puts only this folder on sys.path
    sys.path.insert(0, str(ROOT))

from locust import HttpUser, events, task  # noqa: E402

from tools.registry import MODELS, get  # noqa: E402

MODEL = os.environ.get("OVERLOAD_MODEL") or next(m.name for m in MODELS if m.overload() is not None)
_hook = get(MODEL).overload()
assert _hook is not None, f"{MODEL} has no overload case (tools/{MODEL}/overload.py)"
URL = os.environ.get("OVERLOAD_URL", f"http://127.0.0.1:8080/predictions/{MODEL}")
TOKEN = os.environ.get("OVERLOAD_TOKEN", "")
TIMEOUT_S = float(os.environ.get("OVERLOAD_TIMEOUT_S", "30"))
OUT = os.environ.get("OVERLOAD_OUT", "overload.jsonl")

SMALL_BODY = json.dumps(_hook.small)
LARGE_BODY = json.dumps(_hook.large(json.loads(os.environ.get("OVERLOAD_HANDLER") or "{}")))
HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}

outcomes: list[dict] = []
in_flight: dict[int, tuple[str, float]] = {}
"""Requests sent and not answered yet; those left when the run stops are written as unanswered."""


class _Mixed(HttpUser):
    abstract = True
    host = URL.split("/predictions", 1)[0]
    kind = ""
    body = ""

    def on_start(self) -> None:
        self.backoff_s = 0.0

    def wait_time(self) -> float:
        # A polite client: back-to-back requests, but after a 503 it waits as Retry-After says
        # (1 s when absent). Without that, refusals turn into a retry storm on the same 2 cores.
        return self.backoff_s

    @task
    def predict(self) -> None:
        started = time.monotonic()
        path = URL[len(self.host) :]
        in_flight[id(self)] = (self.kind, started)
        with self.client.post(
            path, data=self.body, headers=HEADERS, timeout=TIMEOUT_S, catch_response=True,
            name=self.kind,
        ) as r:  # fmt: skip
            status = r.status_code or 0  # 0: no answer within the client's timeout
            outcomes.append(
                {
                    "kind": self.kind,
                    "status": status,
                    "latency_s": round(time.monotonic() - started, 4),
                    "retry_after": r.headers.get("Retry-After") if status else None,
                    "reason": _kind(r.text) if status not in (0, 200) else None,
                    "t": round(started, 3),
                }
            )
            in_flight.pop(id(self), None)
            self.backoff_s = _retry_after(r.headers.get("Retry-After")) if status == 503 else 0.0
            # A fast 503 is the behaviour under test, not a failure of the run.
            if status in (200, 503):
                r.success()


def _retry_after(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 1.0
    except ValueError:
        return 1.0


def _kind(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return "not-json"
    return str(body.get("kind") or body.get("type") or "?") if isinstance(body, dict) else "?"


class SmallUser(_Mixed):
    weight = 3
    kind = "small"
    body = SMALL_BODY


class LargeUser(_Mixed):
    weight = 1
    kind = "large"
    body = LARGE_BODY


@events.test_stop.add_listener
def _unanswered(environment, **_kw) -> None:
    now = time.monotonic()
    for kind, started in in_flight.values():
        outcomes.append(
            {"kind": kind, "status": -1, "latency_s": round(now - started, 4), "t": started}
        )
    in_flight.clear()


@events.quitting.add_listener
def _write(environment, **_kw) -> None:
    with open(OUT, "w") as f:
        for o in outcomes:
            f.write(json.dumps(o) + "\n")
