"""Talking to a running TorchServe: its keys, its config, and whether its models are ready.

`/ping` answers 200 before a model has finished loading, so readiness is the workers' status in
`GET /models/<name>` on the management API (which needs the management key).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import requests

# Re-exported: the readers of TorchServe's files live in deploy/ts_files.py.
from deploy.ts_files import load_failure, read_keys, read_properties, render_properties

__all__ = ["model_status", "read_keys", "read_properties", "render_properties", "wait_ready"]


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
    logs: str | Path | None = None,
) -> None:
    """Block until every model has at least one READY worker, or raise TimeoutError.

    alive: says whether the server still runs; when it stops, waiting ends at once.
    logs: TorchServe's log folder; a model's last load failure there (its worker's ArchiveError,
    e.g. "GPU unavailable: ...") is quoted in the TimeoutError.
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
                    reason = load_failure(logs, model) if logs is not None else None
                    if reason:
                        last += f"; last load failure: {reason[:300]}"
        except (OSError, ValueError, KeyError, requests.RequestException) as e:
            last = repr(e)
        if pending:
            time.sleep(0.5)
    if pending:
        raise TimeoutError(f"models not ready after {timeout:.0f}s: {pending} ({last})")
