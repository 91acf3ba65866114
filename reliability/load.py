"""Closed-loop load from a few client threads, recording when each request started, ended and how.

Used to watch a fault happen under traffic: which requests failed, and when answers came back.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import requests


@dataclass(frozen=True)
class Outcome:
    started: float
    ended: float
    status: int
    """HTTP status, or 0 when the client saw no answer (connection reset, timeout)."""
    body: bytes

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class LoadRun:
    url: str
    headers: dict[str, str]
    body: bytes
    clients: int = 4
    timeout: float = 60.0
    outcomes: list[Outcome] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _client(self) -> None:
        with requests.Session() as s:
            while not self._stop.is_set():
                self._add(send(s, self.url, self.headers, self.body, self.timeout))

    def _add(self, o: Outcome) -> None:
        with self._lock:
            self.outcomes.append(o)

    def start(self) -> LoadRun:
        self._threads = [
            threading.Thread(target=self._client, daemon=True) for _ in range(self.clients)
        ]
        for t in self._threads:
            t.start()
        return self

    def stop(self) -> list[Outcome]:
        self._stop.set()
        for t in self._threads:
            t.join(self.timeout + 5)
        with self._lock:
            return sorted(self.outcomes, key=lambda o: o.started)

    def wait_until(self, condition: Callable[[list[Outcome]], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                snapshot = list(self.outcomes)
            if condition(snapshot):
                return True
            time.sleep(0.05)
        return False


def send(
    session: requests.Session, url: str, headers: dict, body: bytes, timeout: float
) -> Outcome:
    started = time.monotonic()
    try:
        r = session.post(url, data=body, headers=headers, timeout=timeout)
        return Outcome(started, time.monotonic(), r.status_code, r.content)
    except requests.RequestException as e:
        return Outcome(started, time.monotonic(), 0, repr(e).encode())


def burst(url: str, headers: dict, body: bytes, n: int, timeout: float = 60.0) -> list[Outcome]:
    """n requests released at the same instant from n threads."""
    gate = threading.Barrier(n)
    out: list[Outcome | None] = [None] * n

    def one(i: int) -> None:
        with requests.Session() as s:
            gate.wait()
            out[i] = send(s, url, headers, body, timeout)

    threads = [threading.Thread(target=one, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout + 5)
    return [o for o in out if o is not None]


@dataclass(frozen=True)
class KillFigures:
    failed: int
    """Requests that got no 200 answer during the run."""
    failed_statuses: list[int]
    total: int
    recovery_s: float | None
    """From the kill to the first 200 answer to a request sent after it; None if none came."""
    gap_s: float | None
    """Longest time with no 200 answer at all around the kill."""


def kill_figures(outcomes: list[Outcome], killed_at: float) -> KillFigures:
    failed = [o for o in outcomes if not o.ok]
    after = [o.ended for o in outcomes if o.ok and o.started >= killed_at]
    recovery = min(after) - killed_at if after else None
    ok_ends = sorted(o.ended for o in outcomes if o.ok)
    before = [t for t in ok_ends if t <= killed_at]
    later = [t for t in ok_ends if t > killed_at]
    gap = (later[0] - (before[-1] if before else killed_at)) if later else None
    return KillFigures(len(failed), sorted(o.status for o in failed), len(outcomes), recovery, gap)
