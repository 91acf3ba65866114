"""A stream's LSTM state, carried by the client between chunks as an opaque, signed token.

No worker keeps anything between requests: the answer to a chunk carries the state after it, and
the next chunk brings it back to any worker of any replica. The token is URL-safe base64 (it also
travels in the `X-Stream-State` header, so it must be ASCII) of:

    magic "FQS2" | key id (8) | version length (1) | model version (utf-8)
    | layers (1) | hidden (2) | F (1) | samples seen (8) | energy (float64) | selectors (F)
    | h, c: float32 little-endian (layers, F, hidden) each | block sums: float32 (F, 2)
    | HMAC-SHA256 tag (16)

`energy` (the sum of the squares of the samples seen: the running scale) and the block sums (the
lock-in products of the block in progress) are what handlers/frequency/lockin.py carries besides
the LSTM's state.

Checked before use, cheapest first: undecodable, wrong size or non-finite → 400; signed with another
key (a rotated Secret, another deployment) or made by another model version (a rolling update
mid-stream) → 409, "restart the stream". Why it is signed at all: docs/architecture.md.
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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from handlers.errors import ArchiveError, BadState, StaleState, echo

KEY_FILE_ENV = "STREAM_STATE_HMAC_FILE"
"""Path of the signing key (a Kubernetes Secret mounted as a file): every replica reads the same.
Its name avoids KEY/SECRET/TOKEN: config.properties' blacklist_env_vars keeps those from workers."""
LOCAL_KEY_NAME = "frequency-state.key"
"""Without KEY_FILE_ENV, a key generated once in a private folder of the server's TMPDIR
(`local_key_dir`; its workers share it)."""
MIN_KEY_BYTES = 16
MAX_KEY_BYTES = 4096
MAX_SAMPLES_SEEN = 2**53
"""A stream longer than this (285,000 years at 1 kHz) is a forged state, not a client's stream."""

MAGIC = b"FQS2"
_HEAD = struct.Struct("<4s8sB")  # magic, key id, version length
_SHAPE = struct.Struct("<BHBQd")  # layers, hidden, number of frequencies, samples seen, energy
TAG_BYTES = 16  # HMAC-SHA256 truncated to 128 bits (RFC 2104 section 5 allows >= half the hash)


@dataclass(frozen=True)
class StreamState:
    h: np.ndarray
    """(layers, F, hidden) float32: one LSTM state per requested frequency."""
    c: np.ndarray
    frequencies: tuple[float, ...]
    """Fixed when the stream opens: later chunks extract the same ones."""
    selectors: tuple[int, ...]
    """Index of each frequency in the served list."""
    samples_seen: int = 0
    energy: float = 0.0
    """Sum of the squares of the samples seen (the running scale continues from it)."""
    acc: np.ndarray | None = None
    """(F, 2) float32 lock-in sums of the block in progress (None: zeros)."""

    def __post_init__(self) -> None:
        if self.acc is None:
            object.__setattr__(self, "acc", np.zeros((len(self.selectors), 2), dtype=np.float32))


def load_key(env: Mapping[str, str] | None = None) -> bytes:
    """The signing key: the file named by STREAM_STATE_HMAC_FILE, else one generated locally in
    a private directory. Any doubt about the file (missing, short, a link where none belongs, someone
    else's, readable by others) is an ArchiveError: the model does not load, with the reason."""
    environ = os.environ if env is None else env
    named = environ.get(KEY_FILE_ENV)
    if named:
        # A mounted Kubernetes Secret is a link into the volume's ..data folder: followed.
        return _read_key(Path(named), private=False)
    path = local_key_dir(environ) / LOCAL_KEY_NAME
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


class StateCodec:
    """Encodes and checks the states of one model version, signed with one key."""

    def __init__(self, key: bytes, version: str, layers: int, hidden: int, num_frequencies: int):
        self.key = key
        self.key_id = hashlib.sha256(b"frequency-state-key-id" + key).digest()[:8]
        self.version = version
        self._version = version.encode("utf-8")[:255]
        self.layers, self.hidden, self.num_frequencies = layers, hidden, num_frequencies
        # The longest valid token: anything longer is refused before it is decoded.
        self.max_chars = 4 * -(-_token_bytes(255, num_frequencies, layers, hidden) // 3)

    def _tag(self, message: bytes) -> bytes:
        return hmac.new(self.key, message, hashlib.sha256).digest()[:TAG_BYTES]

    def encode(self, state: StreamState) -> str:
        f = len(state.selectors)
        message = b"".join(
            [
                _HEAD.pack(MAGIC, self.key_id, len(self._version)),
                self._version,
                _SHAPE.pack(self.layers, self.hidden, f, state.samples_seen, state.energy),
                bytes(state.selectors),
                np.ascontiguousarray(state.h, dtype="<f4").tobytes(),
                np.ascontiguousarray(state.c, dtype="<f4").tobytes(),
                np.ascontiguousarray(state.acc, dtype="<f4").tobytes(),
            ]
        )
        return base64.urlsafe_b64encode(message + self._tag(message)).decode("ascii")

    def decode(self, token: object, frequencies: tuple[float, ...]) -> StreamState:
        """A token from a client → its state; `frequencies` is the served list."""
        raw = self._bytes(token)
        if len(raw) < _HEAD.size:
            raise BadState("the stream state has the wrong size")
        magic, key_id, vlen = _HEAD.unpack_from(raw)
        if magic != MAGIC:
            raise BadState("'state' is not a stream state of this model")
        if key_id != self.key_id:
            raise StaleState(
                "the stream state was signed with another key (a rotated key or another "
                "deployment); restart the stream with 'stream': true"
            )
        at = _HEAD.size + vlen
        if len(raw) < at + _SHAPE.size:
            raise BadState("the stream state has the wrong size")
        layers, hidden, f, seen, energy = _SHAPE.unpack_from(raw, at)
        if len(raw) != _token_bytes(vlen, f, layers, hidden):
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
        if (layers, hidden) != (self.layers, self.hidden):
            raise BadState("the stream state has the wrong size for this model")
        if seen > MAX_SAMPLES_SEEN:
            raise BadState("the stream state's sample count is out of range")
        if not (np.isfinite(energy) and energy >= 0.0):
            raise BadState("the stream state's energy is out of range")
        at += _SHAPE.size
        selectors = tuple(raw[at : at + f])
        if not f or len(set(selectors)) != f or max(selectors) >= self.num_frequencies:
            raise BadState("the stream state names frequencies this model does not serve")
        n = layers * f * hidden
        arrays = np.frombuffer(raw, dtype="<f4", count=2 * n + 2 * f, offset=at + f)
        if not np.isfinite(arrays).all():
            raise BadState("the stream state contains NaN or infinite values")
        h, c = (
            a.reshape(layers, f, hidden).astype(np.float32) for a in (arrays[:n], arrays[n : 2 * n])
        )
        acc = arrays[2 * n :].reshape(f, 2).astype(np.float32)
        return StreamState(h, c, tuple(frequencies[s] for s in selectors), selectors, seen,
                           float(energy), acc)  # fmt: skip

    def _bytes(self, token: object) -> bytes:
        if not isinstance(token, str):
            raise BadState("'state' must be the string a previous answer returned")
        if not 0 < len(token) <= self.max_chars:
            raise BadState("the stream state has the wrong size")
        try:
            return base64.b64decode(token.encode("ascii"), altchars=b"-_", validate=True)
        except (UnicodeEncodeError, binascii.Error, ValueError):
            raise BadState("the stream state is not decodable (not URL-safe base64)") from None


def _token_bytes(version_len: int, f: int, layers: int, hidden: int) -> int:
    return (_HEAD.size + version_len + _SHAPE.size + f + 4 * 2 * layers * f * hidden + 4 * 2 * f
            + TAG_BYTES)  # fmt: skip
