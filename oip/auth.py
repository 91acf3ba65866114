"""Token auth: inference needs `Authorization: Bearer <token>` (gRPC: `authorization` metadata),
any one of the tokens read from --token-file (written, 0600 and random, when it does not exist);
health and metadata routes are open, as a generic client reads them first. --no-auth is for a pod
whose door authenticates. A refusal is the catalogue's `unauthorized` (handlers/errors.py)."""

from __future__ import annotations

import hmac
import secrets
from pathlib import Path

from handlers.errors import Unauthorized


class Token:
    """The client tokens inference needs: any one of them (a Secret holds one a line, two during a
    rotation, as the pod's door reads it); none at all: no check (--no-auth)."""

    def __init__(self, values: tuple[str, ...] | None):
        self.values = values

    @classmethod
    def from_file(cls, path: Path) -> Token:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(24) + "\n")
        tokens = tuple(line.strip() for line in path.read_text().splitlines() if line.strip())
        if not tokens:
            raise SystemExit(f"{path}: no token in it (one a line)")
        return cls(tokens)

    def check(self, headers: dict[str, str] | None) -> None:
        if self.values is None:
            return
        given = next((v for k, v in (headers or {}).items() if k.lower() == "authorization"), None)
        scheme, _, token = (given or "").partition(" ")
        sent = token.strip().encode()
        # Every token compared (no early exit): the time taken says nothing about which matched.
        matches = [hmac.compare_digest(sent, t.encode()) for t in self.values]
        if scheme.lower() != "bearer" or not any(matches):
            raise Unauthorized(
                "missing or wrong token: send 'Authorization: Bearer <token>' (the server's "
                "--token-file)"
            )
