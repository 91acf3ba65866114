"""Frequency streams through the balancer while the rehearsal's events happen: this model's
rehearsal hook (`make rehearse`, rehearsal/__main__.py): `REHEARSAL`, a typed
tools.plugin.Rehearsal of start(), PATH, summarise(), problems(), report().

The stateless stream protocol (handlers/frequency/state.py, docs/clients.md): the first chunk
starts a stream (JSON `"stream": true` with `sample_rate` and `frequencies`, or `X-Stream: start`
on a float32 body), each answer carries the state (`"state"`, `X-Stream-State`), the next chunk
sends it back, to whichever replica the balancer picks. Streams alternate JSON and float32 bodies,
so the state also crosses both HAProxies (balancer and pod proxy) as a header. The balancer names
the replica that answered each chunk (`X-Replica`). When a stream ends, the same signal sent whole
as one chunk is the reference: chunked must equal whole (max |diff| <= 1e-5).

A chunk that gets no answer from a replica (connection error, 502/503/504: the replica was killed
under it) is sent again with the same state: an answer depends only on (state, chunk), so resending
is safe, and this is how a client keeps a stream across the loss of a replica. Every failed attempt
is recorded with its time, so the rehearsal can tell which event caused it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import numpy as np
import requests

from clients.kits import signal as codec
from tools.frequency.client import Extraction
from tools.plugin import Rehearsal

PATH = "/predictions/frequency"
RESEND = {None, 502, 503, 504}
"""Statuses of a chunk no replica answered (None: no HTTP answer at all): safe to send again."""
TOLERANCE = 1e-5


@dataclass
class StreamDriver:
    """Streams, one after another on each of `threads` threads, until stop()."""

    http: str
    token: str
    frequencies: tuple[float, ...]
    sample_rate: int
    signal_s: float = 2.0
    chunks_per_stream: int = 8
    pause_s: float = 0.15
    """Between a stream's chunks: a client reading a sensor, not a load test."""
    attempts: list[dict] = field(default_factory=list)
    """One per HTTP attempt: stream, chunk (None: the whole-signal reference), start, end, replica,
    status, ok, error."""
    streams: list[dict] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self, threads: int = 2) -> StreamDriver:
        for t in range(threads):
            thread = threading.Thread(target=self._run, args=(t, threads), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Lets each thread finish the stream it is on, so every stream is judged whole."""
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _run(self, first: int, step: int) -> None:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {self.token}"
        n = first
        while not self._stop.is_set():
            self.streams.append(self._stream(session, n))
            n += step

    def _stream(self, session: requests.Session, n: int) -> dict:
        rng = np.random.default_rng(n)
        samples = int(self.signal_s * self.sample_rate)
        t = np.arange(samples) / self.sample_rate
        amplitudes = rng.uniform(0.5, 1.5, len(self.frequencies))
        signal = sum(
            a * np.sin(2 * np.pi * f * t + rng.uniform(0, 2 * np.pi))
            for a, f in zip(amplitudes, self.frequencies, strict=True)
        ) / len(self.frequencies)
        signal = signal.astype(np.float32)
        # Irregular cuts: a chunk may be a single sample or straddle a model window.
        cuts = np.sort(rng.choice(np.arange(1, samples), self.chunks_per_stream - 1, replace=False))
        binary = n % 2 == 1
        record = {"stream": n, "body": "float32" if binary else "json", "start": time.time()}
        state, parts, replicas = None, [], []
        for k, chunk in enumerate(np.split(signal, cuts)):
            answer, replica = self._send(session, n, k, chunk, state, binary)
            if answer is None:
                return record | {"end": time.time(), "error": f"chunk {k} got no answer"}
            parts.append(answer.signal)
            replicas.append(replica)
            state = answer.state
            time.sleep(self.pause_s)
        whole, _ = self._send(session, n, None, signal, None, binary)
        if whole is None:
            return record | {"end": time.time(), "error": "the whole signal got no answer"}
        diff = float(np.abs(np.concatenate(parts, axis=1) - whole.signal).max())
        # The answer's size: parity between two empty or zero answers would prove nothing.
        rms = float(np.sqrt(np.mean(np.square(whole.signal))))
        return (
            record
            | {"end": time.time(), "error": None, "max_diff": diff, "rms": rms}
            | {"replicas": replicas}
        )

    def _send(self, session, n, k, chunk, state, binary) -> tuple[Extraction | None, str | None]:
        for _ in range(3):
            start = time.time()
            status = replica = error = None
            try:
                r = self._post(session, chunk, state, binary)
                status, replica = r.status_code, r.headers.get("X-Replica")
                if status == 200:
                    answer = (
                        Extraction.from_float32(r.content, r.headers)
                        if binary
                        else Extraction.from_json(r.json())
                    )
                else:
                    error = f"HTTP {status}: {' '.join(r.text.split())[:160]}"
            except requests.RequestException as e:
                error = f"{type(e).__name__}: {str(e)[:160]}"
            entry = {"stream": n, "chunk": k, "start": start, "end": time.time()}
            entry |= {"replica": replica, "status": status, "ok": error is None, "error": error}
            with self._lock:
                self.attempts.append(entry)
            if error is None:
                return answer, replica
            if status not in RESEND:
                return None, replica  # e.g. 409: the stream cannot go on; the verdict says why
            time.sleep(0.5)
        return None, None

    def _post(self, session, chunk, state, binary) -> requests.Response:
        url = self.http + PATH
        # A continuation keeps its stream's frequencies: only the first chunk names them.
        request = dict(
            signal=chunk, sample_rate=self.sample_rate, stream=state is None, state=state,
            frequencies=self.frequencies if state is None else None,
        )  # fmt: skip
        if binary:
            data, headers = codec.request_float32(**request)
            return session.post(url, data=data, headers=headers, timeout=30)
        return session.post(url, json=codec.request_json(**request), timeout=30)


def tiny_spec():
    """The signal the tiny model the rehearsal serves was trained on (frequencies, sample rate)."""
    from training.frequency.config import CONFIGS

    return CONFIGS["tiny"].signal


def start(http: str, token: str) -> StreamDriver:
    """Streams through the balancer at `http` until .stop(); .attempts and .streams record them."""
    spec = tiny_spec()
    return StreamDriver(http, token, spec.frequencies, spec.sample_rate).start()


def summarise(
    attempts: list[dict],
    streams: list[dict],
    events: list[dict],
    access_logs: dict[str, int] | None = None,
    grace: float = 2.0,
) -> dict:
    """What the report says about the streams: chunks per replica, parity, what each event did.
    `access_logs`: frequency predictions in each replica's TorchServe access log, to compare with
    what the balancer's X-Replica header says each answered (chunks and whole-signal references)."""
    chunks = [a for a in attempts if a["ok"] and a["chunk"] is not None]
    failed = [a for a in attempts if not a["ok"]]
    done = [s for s in streams if s["error"] is None]

    def during(a: dict, ev: dict) -> bool:
        return a["end"] >= ev["start"] and a["start"] <= ev["end"] + grace

    per_event = []
    for ev in events:
        open_ = [s for s in done if s["end"] >= ev["start"] and s["start"] <= ev["end"]]
        per_event.append(
            {
                "event": ev["event"],
                "streams_open": len(open_),
                "on_both": sum(len(set(s["replicas"])) > 1 for s in open_),
                "failed_attempts": sum(during(a, ev) for a in failed),
            }
        )
    return {
        "streams": len(streams),
        "completed": len(done),
        "by_body": {b: sum(s["body"] == b for s in done) for b in ("json", "float32")},
        "chunks": len(chunks),
        "chunks_by_replica": _count(a["replica"] for a in chunks),
        "streams_on_both": sum(len(set(s["replicas"])) > 1 for s in done),
        "max_diff": max((s["max_diff"] for s in done), default=None),
        "min_rms": min((s["rms"] for s in done), default=None),
        "answered_by_header": _count(a["replica"] for a in attempts if a["ok"]),
        "access_logs": access_logs,
        "failed_attempts": len(failed),
        "failed_outside_events": sum(not any(during(a, ev) for ev in events) for a in failed),
        "errors": sorted({a["error"][:120] for a in failed}),
        "stream_errors": [f"stream {s['stream']}: {s['error']}" for s in streams if s["error"]],
        "events": per_event,
    }


def problems(summary: dict) -> list[str]:
    """Every stream completes and equals the whole signal; chunks land on both replicas; a rolling
    restart costs no chunk, even a resent one; streams were open across each event."""
    out = [f"frequency stream failed: {e}" for e in summary["stream_errors"]]
    if not summary["completed"]:
        out.append("no frequency stream completed")
    elif summary["max_diff"] > TOLERANCE:
        out.append(f"frequency streams: chunked != whole (max |diff| {summary['max_diff']:.2e})")
    elif summary["min_rms"] < 1e-3:
        out.append(f"frequency streams: an answer was all zeros (rms {summary['min_rms']:.1e})")
    if len([r for r in summary["chunks_by_replica"] if r]) < 2 or not summary["streams_on_both"]:
        out.append(
            f"frequency chunks did not land on both replicas: {summary['chunks_by_replica']}"
        )
    if summary["failed_outside_events"]:
        out.append(
            f"{summary['failed_outside_events']} stream chunk attempts failed outside events"
        )
    for ev in summary["events"]:
        if not ev["streams_open"]:
            out.append(f"{ev['event']}: no frequency stream was open across it")
        if ev["event"].startswith("rolling") and ev["failed_attempts"]:
            out.append(f"{ev['event']}: {ev['failed_attempts']} stream chunk attempts failed")
    return out


def _count(names) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in names:
        out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: str(kv[0])))


def report(s: dict) -> list[str]:
    """The rehearsal report's section (markdown lines)."""
    replicas = ", ".join(f"{k}: {v}" for k, v in s["chunks_by_replica"].items())
    diff = "n/a" if s["max_diff"] is None else f"{s['max_diff']:.2e}"
    lines = [
        f"Frequency streams through the balancer during the events: {s['completed']} of "
        f"{s['streams']} streams completed (JSON {s['by_body']['json']}, float32 "
        f"{s['by_body']['float32']}), {s['chunks']} chunks answered by replica {replicas}; "
        f"{s['streams_on_both']} streams had chunks on both replicas. Chunked vs whole: max "
        f"|diff| = {diff} (limit 1e-5). Chunk attempts that failed and were resent "
        f"with the same state: {s['failed_attempts']}.",
        "",
        "| event | streams open across it | of which on both replicas | failed chunk attempts (resent) |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {e['event']} | {e['streams_open']} | {e['on_both']} | {e['failed_attempts']} |"
        for e in s["events"]
    ]
    if s["access_logs"] is not None:
        header = ", ".join(f"{k}: {v}" for k, v in s["answered_by_header"].items())
        logs = ", ".join(f"{k}: {v}" for k, v in s["access_logs"].items())
        lines += [
            "",
            f"Cross-check, every frequency request answered (chunks and whole-signal references): "
            f"by the balancer's X-Replica header {header}; by the replicas' TorchServe access "
            f"logs {logs}.",
        ]
    if s["errors"]:
        lines += ["", "Failed attempts: " + "; ".join(s["errors"])]
    return lines + [""]


REHEARSAL = Rehearsal(path=PATH, start=start, summarise=summarise, problems=problems, report=report)
