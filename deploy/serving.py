"""Talking to a running TorchServe: its keys, its config, and whether its models are ready.

`/ping` answers 200 before a model has finished loading, so readiness is the workers' status in
`GET /models/<name>` on the management API (which needs the management key).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import requests


def read_properties(path: str | Path) -> dict[str, str]:
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


def read_keys(workdir: str | Path) -> dict[str, str]:
    """key_file.json → {"inference": ..., "management": ..., "api": ...}."""
    data = json.loads((Path(workdir) / "key_file.json").read_text())
    return {
        name: data[name]["key"] for name in ("inference", "management", "API") if name in data
    } | {"api": data.get("API", {}).get("key", "")}


def model_status(management_url: str, key: str, model: str, timeout: float = 5) -> list[dict]:
    r = requests.get(
        f"{management_url}/models/{model}",
        headers={"Authorization": f"Bearer {key}"},
        timeout=timeout,
    )
    r.raise_for_status()
    return r.json()


def wait_ready(
    management_url: str,
    keyfile_dir: str | Path,
    models: list[str],
    timeout: float = 300,
    alive: Callable[[], bool] | None = None,
) -> None:
    """Block until every model has at least one READY worker, or raise TimeoutError.

    alive: says whether the server still runs; when it stops, waiting ends at once.
    """
    deadline = time.monotonic() + timeout
    pending = list(models)
    last = ""
    while pending and time.monotonic() < deadline:
        if alive is not None and not alive():
            raise TimeoutError(f"TorchServe exited before {pending} were ready ({last})")
        try:
            key = read_keys(keyfile_dir)["management"]
            for model in list(pending):
                workers = model_status(management_url, key, model)[0].get("workers", [])
                if any(w.get("status") == "READY" for w in workers):
                    pending.remove(model)
                else:
                    last = f"{model}: {[w.get('status') for w in workers]}"
        except (OSError, ValueError, KeyError, requests.RequestException) as e:
            last = repr(e)
        if pending:
            time.sleep(0.5)
    if pending:
        raise TimeoutError(f"models not ready after {timeout:.0f}s: {pending} ({last})")
