"""What a run looks at: whether an answer is acceptable, who the workers are, what they can see."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from deploy.serving import model_status


@dataclass(frozen=True)
class Verdict:
    ok: bool
    status: int
    why: str


def judge_answer(status: int, body: bytes, content_type: str = "") -> Verdict:
    """A bad input must get a 4xx with a JSON reason, or a valid prediction; never a 5xx.

    A prediction is a JSON object or list, or, for a client that asked for one with `Accept`, a
    float32 answer (`application/octet-stream`, whole little-endian floats).

    TorchServe's own 413 (body over max_request_size) has an empty body in 0.12: the status
    alone is the reason, and it is the only 4xx accepted without one.
    """
    if status >= 500:
        return Verdict(False, status, f"server error {status}: {body[:200]!r}")
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    if 200 <= status < 300:
        binary = content_type.split(";")[0].strip().lower() == "application/octet-stream"
        if binary and body and len(body) % 4 == 0:
            return Verdict(True, status, "float32 prediction")
        if isinstance(parsed, dict | list) and parsed:
            return Verdict(True, status, "prediction")
        return Verdict(False, status, f"2xx without a JSON prediction: {body[:200]!r}")
    if 400 <= status < 500:
        if status == 413 and not body:
            return Verdict(True, status, "refused by size")
        if isinstance(parsed, dict) and (parsed.get("error") or parsed.get("message")):
            return Verdict(True, status, "refused with reason")
        return Verdict(False, status, f"{status} without a JSON reason: {body[:200]!r}")
    return Verdict(False, status, f"unexpected status {status}")


@dataclass(frozen=True)
class Worker:
    id: str
    pid: int
    status: str


def workers(management_url: str, key: str, model: str, timeout: float = 10) -> list[Worker]:
    return [
        Worker(str(w.get("id")), int(w.get("pid") or -1), str(w.get("status")))
        for w in model_status(management_url, key, model, timeout)[0].get("workers", [])
    ]


def worker_identity(
    management_url: str, key: str, models: list[str]
) -> dict[str, set[tuple[str, int]]]:
    """{model: {(worker id, pid)}}: a restarted worker gets a new pid (and usually a new id)."""
    return {m: {(w.id, w.pid) for w in workers(management_url, key, m)} for m in models}


def process_environment(pid: int) -> dict[str, str]:
    """The environment a process started with, as the kernel keeps it in /proc/<pid>/environ."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}
