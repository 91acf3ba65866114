"""Where the client's bearer tokens come from, and how an expired one is replaced.

TorchServe writes `key_file.json` (inference, management and API keys) into its working directory.
Inference and management keys expire after `token_expiration_min` (60 by default); the API key does
not. Once expired, a key is refused like a wrong one (HTTP 400 InvalidKeyException, gRPC
PERMISSION_DENIED). On such a refusal the client calls `refresh`, which
  1. re-reads the key file: someone (an operator, a sidecar, another client) may have rotated it;
  2. otherwise, with the API key and the management address, asks TorchServe for a new key
     (`GET /token?type=inference`, which rewrites the key file; its HTTP answer carries no key) and
     reads the file again.
A key given explicitly or by environment variable is used as is; it can only be refreshed from a
key file.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

import requests

from deploy.ts_files import read_keys

KINDS = ("inference", "management")
ENV_VARS = {"inference": "TS_INFERENCE_KEY", "management": "TS_MANAGEMENT_KEY", "api": "TS_API_KEY"}


def read_key_file(path: str | Path) -> dict[str, str]:
    """{"inference": key, "management": key, "api": key} from TorchServe's key_file.json."""
    return read_keys(path)


@dataclass
class TokenSource:
    key_file: Path | None = None
    """TorchServe's key_file.json; re-read on every refresh."""
    keys: dict[str, str] | None = None
    """Explicit keys by kind ("inference", "management", "api"); win over the file."""
    management_url: str | None = None
    """Where the token API lives (the management address); needed to mint a new key."""
    timeout: float = 10.0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, str] = dict(self.keys or {})
        for kind, var in ENV_VARS.items():
            if kind not in self._cache and os.environ.get(var):
                self._cache[kind] = os.environ[var]
        self._pinned = set(self._cache)  # explicit or env keys: never replaced by the file
        if self.key_file is not None:
            self.key_file = Path(self.key_file)

    def get(self, kind: str) -> str | None:
        """The current key of `kind`, or None when token authorization is not configured here."""
        with self._lock:
            if kind not in self._cache and self.key_file is not None and self.key_file.exists():
                self._cache.update(
                    {k: v for k, v in read_key_file(self.key_file).items() if k not in self._pinned}
                )
            return self._cache.get(kind)

    def why_missing(self, kind: str) -> str | None:
        """Why there is no `kind` key, naming where it was looked for; None when there is one."""
        if self.get(kind):
            return None
        var = ENV_VARS.get(kind, "")
        if self.key_file is None:
            return f"no {kind} key: no key file given and {var} is not set"
        where = self.key_file.resolve()
        if not where.exists():
            return (
                f"no {kind} key: {where} does not exist and {var} is not set (TorchServe writes "
                "key_file.json into the folder it was started from; pass --key-file)"
            )
        return f"no {kind} key in {where}"

    def refresh(self, kind: str, rejected: str | None) -> str | None:
        """A fresh key of `kind` to replace `rejected`, or None when there is none to be had."""
        with self._lock:
            if self.key_file is None or not self.key_file.exists():
                return None
            fresh = read_key_file(self.key_file).get(kind)
            if fresh and fresh != rejected:
                self._cache[kind] = fresh
                self._pinned.discard(kind)
                return fresh
            api_key = self._cache.get("api") or read_key_file(self.key_file).get("api")
            if not (api_key and self.management_url):
                return None
            self._rotate(kind, api_key)
            fresh = read_key_file(self.key_file).get(kind)
            if not fresh or fresh == rejected:
                return None
            self._cache[kind] = fresh
            self._pinned.discard(kind)
            return fresh

    def rotate(self, kind: str = "inference") -> str:
        """Ask TorchServe for a new `kind` key now (invalidates the old one) and return it."""
        with self._lock:
            if self.key_file is None or not self.management_url:
                raise ValueError("rotating a key needs the key file and the management address")
            api_key = self._cache.get("api") or read_key_file(self.key_file)["api"]
            self._rotate(kind, api_key)
            self._cache[kind] = read_key_file(self.key_file)[kind]
            self._pinned.discard(kind)
            return self._cache[kind]

    def _rotate(self, kind: str, api_key: str) -> None:
        r = requests.get(
            f"{self.management_url}/token",
            params={"type": kind},
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=self.timeout,
        )
        r.raise_for_status()


def bearer(key: str | None) -> str | None:
    return f"Bearer {key}" if key else None
