"""Stateful streams without state in the workers: the state a stream's next chunk starts from is
carried by the client between chunks as an opaque, signed token, and any worker of any replica
continues it. What the state holds is the model's (its `payload`); the kit gives the signing key
and the envelope. The token is URL-safe base64 (it also travels in the `X-Stream-State` header, so
it must be ASCII) of:

    magic (4, the model's) | key id (8) | version length (1) | model version (utf-8)
    | [issued at: float64 Unix seconds, only for a model that sets a maximum age] | payload
    | HMAC-SHA256 tag (16)

Checked before the model reads the payload, cheapest first: not a string, too long, undecodable
or the wrong size → 400 bad_state; signed with another key (a rotated Secret, another deployment)
made by another model version (a rolling update mid-stream), or older than the model's maximum
age, if it sets one → 409 stale_state, "restart the stream"; altered (the signature does not match) → 400. Why it is signed
at all: docs/architecture.md.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import hmac
import os
import secrets
import stat
import struct
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from handlers.errors import ArchiveError, BadState, StaleState, echo

KEY_FILE_ENV = "STREAM_STATE_HMAC_FILE"
"""Path of the signing key (a Kubernetes Secret mounted as a file): every replica reads the same.
Its name avoids KEY/SECRET/TOKEN: config.properties' blacklist_env_vars keeps those from workers."""
MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 4096

_HEAD = struct.Struct("<4s8sB")  # magic, key id, version length
_ISSUED = struct.Struct("<d")
CLOCK_SKEW_S = 60.0
"""How far ahead of this replica's clock another replica's may be (a state issued "later")."""
TAG_BYTES = 16  # HMAC-SHA256 truncated to 128 bits (RFC 2104 section 5 allows >= half the hash)


def load_key(local_name: str, env: Mapping[str, str] | None = None) -> bytes:
    """The signing key: the file named by STREAM_STATE_HMAC_FILE, else one generated once as
    `local_name` in a private folder of the server's TMPDIR (`local_key_dir`; its workers share
    it). Any doubt about the file (missing, short, a link where none belongs, someone
    else's, readable by others) is an ArchiveError: the model does not load, with the reason."""
    environ = os.environ if env is None else env
    named = environ.get(KEY_FILE_ENV)
    if named:
        # A mounted Kubernetes Secret is a link into the volume's ..data folder: followed.
        return _read_key(Path(named), private=False)
    path = local_key_dir(environ) / local_name
    if not os.path.lexists(path):
        _create_key(path)
    return _read_key(path, private=True)


def local_key_dir(env: Mapping[str, str]) -> Path:
    """`$TMPDIR/torchserve-deploy-<uid>`: created 0700 by us, used only while owned by us and
    private. A shared temp folder is writable by every local user: a key planted there, or a
    folder made by someone else, is refused rather than adopted."""
    base = Path(env.get("TMPDIR") or tempfile.gettempdir())
    path = base / f"torchserve-deploy-{os.geteuid()}"
    base.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    st = os.lstat(path)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise ArchiveError(
            f"{path} holds the stream state key and must be a directory owned by uid "
            f"{os.geteuid()} with mode 0700; remove it, or set {KEY_FILE_ENV}"
        )
    return path


def _read_key(path: Path, private: bool) -> bytes:
    flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if private else 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ArchiveError(f"cannot read the stream state key {path}: {e.strerror}") from e
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ArchiveError(f"the stream state key {path} is not a regular file")
        if private and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
            raise ArchiveError(
                f"the stream state key {path} must be owned by uid {os.geteuid()} with mode 0600"
            )
        if st.st_mode & 0o002:
            raise ArchiveError(f"the stream state key {path} is writable by every user")
        key = f.read(MAX_KEY_BYTES + 1).strip()
    if len(key) < MIN_KEY_BYTES:
        raise ArchiveError(f"the stream state key {path} has under {MIN_KEY_BYTES} bytes")
    if len(key) > MAX_KEY_BYTES:
        raise ArchiveError(f"the stream state key {path} has over {MAX_KEY_BYTES} bytes")
    return key


def _create_key(path: Path) -> None:
    # Workers start together: write a private temp file, then link it into place. link() fails if
    # another worker won the race, and then everyone reads the winner's complete key.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".key-")  # mode 0600
    try:
        os.write(fd, base64.b64encode(secrets.token_bytes(32)) + b"\n")
        os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)
    finally:
        os.unlink(tmp)


class SignedStates:
    """Seals and opens the state tokens of one model version, signed with one key: the envelope
    around a model's payload (the module's docstring)."""

    def __init__(
        self,
        key: bytes,
        version: str,
        magic: bytes,
        label: bytes,
        max_payload: int,
        max_age_s: float | None = None,
        clock: Callable[[], float] = time.time,
        earlier_magics: tuple[bytes, ...] = (),
    ):
        """`magic`: 4 bytes naming the model's state format; `label`: what the key id is derived
        with; `max_payload`: the longest payload, bytes (a longer token is refused undecoded);
        `max_age_s`: a state older than this has expired (None: states do not expire, and the
        envelope carries no time); `earlier_magics`: the magics of the model's earlier state
        formats, whose tokens are stale (409, restart the stream) rather than foreign."""
        self.earlier_magics = earlier_magics
        self.max_age_s, self.clock = max_age_s, clock
        self._issued = _ISSUED.size if max_age_s is not None else 0
        max_payload += self._issued
        self.key = key
        self.key_id = hashlib.sha256(label + key).digest()[:8]
        self.magic = magic
        self.version = version
        self._version = version.encode("utf-8")[:255]
        self.max_chars = 4 * -(-(_HEAD.size + 255 + max_payload + TAG_BYTES) // 3)

    def _tag(self, message: bytes) -> bytes:
        return hmac.new(self.key, message, hashlib.sha256).digest()[:TAG_BYTES]

    def seal(self, payload: bytes) -> str:
        if self.max_age_s is not None:
            payload = _ISSUED.pack(self.clock()) + payload
        message = _HEAD.pack(self.magic, self.key_id, len(self._version)) + self._version + payload
        return base64.urlsafe_b64encode(message + self._tag(message)).decode("ascii")

    def open(self, token: object, payload_size: Callable[[bytes, int], int | None]) -> bytes:
        """A client's token → its payload. `payload_size(raw, at)`: the size of the payload that
        starts at `at`, from its own head (None: too short to tell)."""
        raw = self._bytes(token)
        if len(raw) < _HEAD.size:
            raise BadState("the stream state has the wrong size")
        magic, key_id, vlen = _HEAD.unpack_from(raw)
        if magic in self.earlier_magics:
            raise StaleState(
                "the stream state was made by an earlier server version (an update happened "
                "mid-stream); restart the stream with 'stream': true"
            )
        if magic != self.magic:
            raise BadState("'state' is not a stream state of this model")
        if key_id != self.key_id:
            raise StaleState(
                "the stream state was signed with another key (a rotated key or another "
                "deployment); restart the stream with 'stream': true"
            )
        at = _HEAD.size + vlen
        size = payload_size(raw, at + self._issued)
        if size is None or len(raw) != at + self._issued + size + TAG_BYTES:
            raise BadState("the stream state has the wrong size")
        message, tag = raw[:-TAG_BYTES], raw[-TAG_BYTES:]
        if not hmac.compare_digest(tag, self._tag(message)):
            raise BadState("the stream state was altered (its signature does not match)")
        version = raw[_HEAD.size : at]
        if version != self._version:  # as encoded: cut to 255 bytes
            raise StaleState(
                f"the stream state was made by model version "
                f"{echo(version.decode('utf-8', 'replace'))}, this replica serves "
                f"{echo(self.version)} (an update happened mid-stream); restart the stream with "
                "'stream': true"
            )
        if self.max_age_s is not None:
            [issued] = _ISSUED.unpack_from(raw, at)
            age = self.clock() - issued
            if not -CLOCK_SKEW_S <= age <= self.max_age_s:  # also NaN, and the far future
                raise StaleState(
                    f"the stream state has expired (streams pause at most {self.max_age_s:g} s "
                    "between chunks); restart the stream with 'stream': true"
                )
        return message[at + self._issued :]

    def _bytes(self, token: object) -> bytes:
        if not isinstance(token, str):
            raise BadState("'state' must be the string a previous answer returned")
        if not 0 < len(token) <= self.max_chars:
            raise BadState("the stream state has the wrong size")
        try:
            return base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True)
        except (UnicodeEncodeError, binascii.Error, ValueError):
            raise BadState("the stream state is not decodable (not URL-safe base64)") from None
