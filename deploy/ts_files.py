"""TorchServe's own files, read one way by everything here: `config.properties` and the
`key_file.json` it writes into its working directory (token authorization).

Standard library only: the pod's probe (docker/probe.py) imports it every few seconds, and the
clients import it without the serving stack.
"""

from __future__ import annotations

import json
from pathlib import Path

CONFIG_FILE = "config.properties"
KEY_FILE = "key_file.json"
KEY_NAMES = {"inference": "inference", "management": "management", "api": "API"}
"""Our key kinds → the names TorchServe writes in key_file.json."""


def read_properties(path: str | Path) -> dict[str, str]:
    """`key=value` lines of a config.properties file ('#' comments and blank lines skipped)."""
    props = {}
    for line in Path(path).read_text().splitlines():
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
