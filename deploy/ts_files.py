"""TorchServe's own files, read one way by everything here: `config.properties`, the
`key_file.json` it writes into its working directory (token authorization), the reason a
model's worker last failed to load, from its `model_log.log`, and the java.io.tmpdir where its
frontend unpacks archives and names worker sockets.

Standard library only: the pod's probe (docker/probe.py) imports it every few seconds, and the
clients import it without the serving stack.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

CONFIG_FILE = "config.properties"
KEY_FILE = "key_file.json"
KEY_NAMES = {"inference": "inference", "management": "management", "api": "API"}
"""Our key kinds → the names TorchServe writes in key_file.json."""
AF_UNIX_PATH_MAX = 107
"""The longest path a Unix socket can be bound to on Linux (sun_path's 108 bytes, NUL-ended)."""
MODEL_LOG = "model_log.log"
LOG_TAIL_BYTES = 512 * 1024
"""How much of the end of model_log.log is searched for a load failure: a worker that cannot
load retries with back-off, so its latest traceback is always near the end."""
_LOG_LINE = re.compile(r" W-\d+-(?P<thread>\S+)-std(?:out|err) MODEL_LOG - (?P<message>.*)$")
_LOAD_FAILURE = re.compile(
    r"^(?:(?:[\w.]+\.)?ArchiveError: (?P<archive>.+)"
    r"|Failed to load model (?P<name>\S+), exception (?P<exception>.+))$"
)


def java_tmpdir(root: str | Path, tmp: str | None = None) -> Path:
    """The java.io.tmpdir for a TorchServe whose files live in `root`. The frontend unpacks every
    archive it loads into `<java.io.tmpdir>/models/<uuid>` and leaves it there when it stops (a
    sentiment archive unpacks to about 100 MB), and names each worker's socket
    `<java.io.tmpdir>/.ts.sock.<port>` from the port alone: a starting worker deletes whatever file
    is there, so two servers on one host that share the folder and count from the same port take
    each other's worker sockets. One folder per server, removed when it stops, keeps both its own.
    Short, under the system's temp folder, so a socket path stays inside AF_UNIX's 107 bytes
    wherever `root` is; under /tmp (Java's own default) where the temp folder's path is too long
    for that. `tmp`: the temp folder of the process that starts the server, where not this one's."""
    digest = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:12]
    for base in (tmp or tempfile.gettempdir(), "/tmp"):
        folder = Path(base) / f"ts-java-{digest}"
        if len(str(folder / ".ts.sock.65535").encode()) <= AF_UNIX_PATH_MAX:
            break
    return folder


def read_properties(path: str | Path) -> dict[str, str]:
    """`key=value` lines of a config.properties file ('#' comments and blank lines skipped)."""
    return parse_properties(Path(path).read_text())


def parse_properties(text: str) -> dict[str, str]:
    """`key=value` lines of a config.properties text ('#' comments and blank lines skipped)."""
    props = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            props[key.strip()] = value.strip()
    return props


def render_properties(base: str, overrides: dict[str, str]) -> str:
    """Rewrite `key=value` lines of a config.properties text; keys not there are appended."""
    out, seen = [], set()
    for line in base.splitlines():
        key = (
            line.split("=", 1)[0].strip()
            if "=" in line and not line.lstrip().startswith("#")
            else None
        )
        if key in overrides:
            out.append(f"{key}={overrides[key]}")
            seen.add(key)
        else:
            out.append(line)
    out += [f"{k}={v}" for k, v in overrides.items() if k not in seen]
    return "\n".join(out) + "\n"


def token_auth_on(workdir: str | Path) -> bool:
    """Whether the TorchServe started in `workdir` checks tokens (its default: yes)."""
    path = Path(workdir) / CONFIG_FILE
    config = read_properties(path) if path.is_file() else {}
    return config.get("disable_token_authorization", "false").lower() != "true"


def read_keys(path: str | Path) -> dict[str, str]:
    """{"inference": key, "management": key, "api": key} from key_file.json, given the file or
    the working directory that holds it."""
    path = Path(path)
    if path.is_dir():
        path = path / KEY_FILE
    data = json.loads(path.read_text())
    return {kind: data[name]["key"] for kind, name in KEY_NAMES.items() if name in data}


def log_dir(workdir: str | Path = ".") -> Path:
    """Where TorchServe writes its logs: $LOG_LOCATION (the images set it), else logs/ under the
    directory it was started from."""
    location = os.environ.get("LOG_LOCATION")
    return Path(location) if location else Path(workdir) / "logs"


def load_failure(logs: str | Path, model: str, tail_bytes: int = LOG_TAIL_BYTES) -> str | None:
    """The reason `model`'s worker last failed to load, from the end of model_log.log in `logs`:
    the message of the handler's ArchiveError (a GPU replica without its GPU says "GPU
    unavailable: ...") or of TorchServe's "Failed to load model" line. None when the log is absent
    or names no such failure for this model."""
    path = Path(logs) / MODEL_LOG
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - tail_bytes))
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    reason = None
    for line in text.splitlines():
        m = _LOG_LINE.search(line)
        if not m or not m["thread"].startswith(f"{model}_"):
            continue
        failure = _LOAD_FAILURE.match(m["message"].strip())
        if failure:
            reason = failure["archive"] or failure["exception"]
    return reason
