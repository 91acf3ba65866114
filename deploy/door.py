"""The door's error bodies, generated from the error catalogue (handlers/errors.KINDS).

The pod's door (docker/haproxy.cfg) answers some requests itself (no token, a chunked upload, a
body over max_request_size, a route not served, a full replica) and rewrites TorchServe's own errors
into the handlers' shape. Each such answer's body is a file here, docker/door/<answer>.json, which
the cfg names (`lf-file door/<answer>.json`, relative to the cfg: `default-path config`): HAProxy
fills in the request id (and where the answer passes on TorchServe's reason, that reason) when it
answers. The files are written by this module and committed; `--check` (and a unit test) fails when
the files, the cfg and the catalogue disagree: an answer's kind not in the catalogue, a status the
kind is not answered with, a Retry-After the kind does not have, a JSON body written by hand.

    python -m deploy.door            # (re)write docker/door/*.json
    python -m deploy.door --check    # exit 1, saying what differs, when they disagree
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from handlers.errors import GRPC_BY_STATUS, GRPC_CODES, KINDS, REQUEST_ID_PATTERN

ROOT = Path(__file__).resolve().parents[1]
CFG = ROOT / "docker" / "haproxy.cfg"
DOOR = ROOT / "docker" / "door"

REQUEST_ID = "%[var(txn.request_id),json(ascii)]"
"""The request id as HAProxy writes it into a body (docker/haproxy.cfg sets txn.request_id)."""
TS_REASON = "%[var(txn.ts_reason),json(utf8s)]"
"""TorchServe's own message, where the door rewrites one of its errors."""


@dataclass(frozen=True)
class DoorAnswer:
    kind: str
    reason: str
    """Plain text, or a HAProxy sample expression (`%[...]`) written as it is."""

    def body(self) -> str:
        reason = self.reason if self.reason.startswith("%[") else _text(self.reason)
        return (
            f'{{"error": "{reason}", "kind": {json.dumps(self.kind)}, '
            f'"request_id": "{REQUEST_ID}"}}'
        )


def _text(reason: str) -> str:
    """Plain text inside a JSON string in a log-format file: JSON-escaped, "%" doubled, except the
    one sample the door fills in (the configured max_request_size)."""
    escaped = json.dumps(reason)[1:-1].replace("%", "%%")
    return escaped.replace("%%[env(MAX_REQUEST_SIZE)]", "%[env(MAX_REQUEST_SIZE)]")


ANSWERS: dict[str, DoorAnswer] = {
    "unauthorized": DoorAnswer("unauthorized", "missing or invalid bearer token"),
    "length_required": DoorAnswer(
        "length_required", "send the body with Content-Length (chunked uploads are not accepted)"
    ),
    "too_large": DoorAnswer(
        "too_large", "request body over max_request_size (%[env(MAX_REQUEST_SIZE)] bytes)"
    ),
    "not_found-surface": DoorAnswer(
        "not_found",
        "not served here: this replica serves POST /predictions/<model>[/<version>], "
        "POST /explanations/<model>[/<version>] and GET /ping",
    ),
    "not_found-metrics": DoorAnswer("not_found", "not served here: this port serves GET /metrics"),
    "method_not_allowed-predictions": DoorAnswer(
        "method_not_allowed", "use POST for /predictions/<model> and /explanations/<model>"
    ),
    "method_not_allowed-ping": DoorAnswer("method_not_allowed", "use GET for /ping"),
    "overloaded-explanations": DoorAnswer(
        "overloaded", "explanations are busy on this replica, retry"
    ),
    "overloaded-replica": DoorAnswer("overloaded", "replica full or not serving, retry"),
    "timeout-request": DoorAnswer("timeout", "the request did not arrive in time"),
    "timeout-torchserve": DoorAnswer("timeout", "TorchServe did not answer in time"),
    "not_found-oip": DoorAnswer(
        "not_found",
        "not served here: this replica serves the Open Inference Protocol's GET /v2, "
        "/v2/health/live, /v2/health/ready, /v2/models/<model>[/versions/<v>][/ready] and "
        "POST /v2/models/<model>[/versions/<v>]/infer",
    ),
    "method_not_allowed-oip-read": DoorAnswer(
        "method_not_allowed", "use GET for /v2, /v2/health/* and /v2/models/<model>[/ready]"
    ),
    "method_not_allowed-oip-infer": DoorAnswer(
        "method_not_allowed", "use POST for /v2/models/<model>/infer"
    ),
    "timeout-oip": DoorAnswer("timeout", "the model server did not answer in time"),
    "not_found-torchserve": DoorAnswer("not_found", TS_REASON),
    "unauthorized-torchserve": DoorAnswer("unauthorized", TS_REASON),
    "internal-torchserve": DoorAnswer("internal", TS_REASON),
}
"""Every body the door answers with: the file's name → its kind and reason."""


def render() -> dict[str, str]:
    """Each door file's name → its content."""
    return {f"{name}.json": answer.body() + "\n" for name, answer in ANSWERS.items()}


def write(door: Path = DOOR) -> None:
    door.mkdir(parents=True, exist_ok=True)
    files = render()
    for stale in door.glob("*.json"):
        if stale.name not in files:
            stale.unlink()
    for name, text in files.items():
        (door / name).write_text(text)


_LINE_FILE = re.compile(r"\blf-file door/([\w.-]+)\.json")
_STATUS = re.compile(r"\bstatus (\d{3})\b")
_RETRY = re.compile(r"\bhdr Retry-After (\d+)")
_GRPC_RETURN = re.compile(r"\bhdr grpc-status (\d+)\b.*?\bhdr error-kind (\w+)")
_GRPC_SET = re.compile(r"set-header grpc-status (\d+) if \{ var\(txn\.grpc_kind\) -m str (\w+) \}")
_GRPC_KIND = re.compile(r"set-var\(txn\.grpc_kind\) str\((\w+)\)")


def check(cfg_text: str, door: Path = DOOR) -> list[str]:
    """What disagrees between the cfg, the door files and the catalogue (empty: nothing)."""
    problems: list[str] = []
    for name, text in render().items():
        path = door / name
        if not path.is_file() or path.read_text() != text:
            problems.append(f"{path}: not as generated (python -m deploy.door)")
    extra = {p.name for p in door.glob("*.json")} - set(render())
    problems += [f"{door / n}: no door answer of that name" for n in sorted(extra)]
    lines = [ln.strip() for ln in cfg_text.splitlines() if not ln.strip().startswith("#")]
    used: set[str] = set()
    for line in lines:
        if re.search(r"""(lf-)?string ['"]\{""", line):
            problems.append(f"a JSON body written by hand in the cfg: {line[:90]}")
        if (m := _LINE_FILE.search(line)) is None:
            continue
        answer = ANSWERS.get(m.group(1))
        if answer is None:
            problems.append(f"door/{m.group(1)}.json: not a door answer: {line[:90]}")
            continue
        entry = KINDS[answer.kind]
        used.add(answer.kind)
        status = _STATUS.search(line)
        if status is None or int(status.group(1)) not in entry.statuses:
            problems.append(f"{answer.kind} is answered with {entry.statuses}: {line[:90]}")
        retry = _RETRY.search(line)
        if (int(retry.group(1)) if retry else None) != entry.retry_after_s:
            problems.append(f"{answer.kind}: Retry-After {entry.retry_after_s}: {line[:90]}")
    for line in lines:
        pairs = [m.groups() for m in _GRPC_RETURN.finditer(line)]
        pairs += [m.groups() for m in _GRPC_SET.finditer(line)]
        for code, kind in pairs:
            if kind not in KINDS:
                problems.append(f"gRPC error-kind {kind} not in the catalogue: {line[:90]}")
                continue
            used.add(kind)
            codes = {GRPC_CODES[GRPC_BY_STATUS[s]] for s in KINDS[kind].statuses}
            if int(code) not in codes:
                problems.append(f"{kind} over gRPC is {sorted(codes)}, not {code}: {line[:90]}")
        if "hdr grpc-status" in line and "error-kind" not in line:
            problems.append(f"a gRPC refusal without its error-kind: {line[:90]}")
        for kind in _GRPC_KIND.findall(line):
            if kind not in KINDS:
                problems.append(f"gRPC kind {kind} not in the catalogue: {line[:90]}")
    door_kinds = {k for k, e in KINDS.items() if e.by == "door"}
    problems += [f"{k}: a door kind the door never answers" for k in sorted(door_kinds - used)]
    takes = [ln for ln in lines if "set-var(txn.request_id) req.fhdr(x-request-id)" in ln]
    if len(takes) < 2:  # the REST and the gRPC frontend
        problems.append("a frontend does not take the client's X-Request-ID")
    for line in takes:
        if f"-m reg '{REQUEST_ID_PATTERN}'" not in line:
            problems.append(
                f"a client request id not checked with {REQUEST_ID_PATTERN}: {line[:90]}"
            )
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--check", action="store_true", help="only check; exit 1 on a difference")
    p.add_argument("--cfg", type=Path, default=CFG)
    args = p.parse_args(argv)
    if not args.check:
        write()
    problems = check(args.cfg.read_text())
    for problem in problems:
        print(f"door: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
