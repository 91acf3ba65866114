"""What a frequency stream's state holds: the LSTM's state and the lock-in sums, sealed in the
signal kit's signed envelope (handlers/kits/signal/state.py: the key, signing, verification,
expiry by key and version). The payload:

    layers (1) | hidden (2) | F (1) | samples seen (8) | energy (float64) | served (1)
    | selectors (F)
    | h, c: float32 little-endian (layers, F, hidden) each | block sums: float32 (F, 2)
    | judged sums: float64 little-endian (handlers/frequency/stationarity.Stats, over every
      served frequency, whichever the stream extracts)

`energy` (the sum of the squares of the samples seen: the running scale) and the block sums (the
lock-in products of the block in progress) are what handlers/frequency/lockin.py carries besides
the LSTM's state; the judged sums are what the stream's out-of-distribution figures are computed
from (handlers/frequency/stationarity.py). Checked after the envelope: the wrong shape for this model, out-of-range counts,
unserved frequencies or non-finite values → 400.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from handlers.errors import BadState
from handlers.frequency.stationarity import Stats, stats_size
from handlers.kits.signal import state as kit
from handlers.kits.signal.state import KEY_FILE_ENV, SignedStates, local_key_dir

__all__ = [
    "KEY_FILE_ENV",
    "LOCAL_KEY_NAME",
    "StateCodec",
    "StreamState",
    "load_key",
    "local_key_dir",
]

LOCAL_KEY_NAME = "frequency-state.key"
"""Without KEY_FILE_ENV, the key generated once in a private folder of the server's TMPDIR."""
MAX_SAMPLES_SEEN = 2**53
"""A stream longer than this (285,000 years at 1 kHz) is a forged state, not a client's stream."""
MAGIC = b"FQS3"
EARLIER_MAGICS = (b"FQS2",)
"""States of earlier server versions (without the judged sums): stale, restart the stream."""
_SHAPE = struct.Struct("<BHBQdB")
"""layers, hidden, number of frequencies, samples seen, energy, number of served frequencies (the
judged sums' size)."""


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
    stats: Stats | None = None
    """The judged sums over the stream's samples (None: zeros over the served frequencies,
    whose number `StateCodec` knows)."""

    def __post_init__(self) -> None:
        if self.acc is None:
            object.__setattr__(self, "acc", np.zeros((len(self.selectors), 2), dtype=np.float32))


def load_key(env: Mapping[str, str] | None = None) -> bytes:
    """The signing key (the kit's `load_key`, this model's local key name)."""
    return kit.load_key(LOCAL_KEY_NAME, env)


def _payload_bytes(f: int, layers: int, hidden: int, served: int) -> int:
    """The payload's size: its head, the selectors, (h, c), the block sums, the judged sums."""
    return _SHAPE.size + f + 4 * 2 * layers * f * hidden + 4 * 2 * f + 8 * stats_size(served)


class StateCodec:
    """Encodes and checks the states of one model version, signed with one key."""

    def __init__(
        self,
        key: bytes,
        version: str,
        layers: int,
        hidden: int,
        num_frequencies: int,
        window: int | None = None,
    ):
        """`window`: samples per judged window (stationarity.window_samples), to check a state's
        sums against its sample count; None: not checked."""
        self.layers, self.hidden, self.num_frequencies = layers, hidden, num_frequencies
        self.window = window
        self.envelope = SignedStates(key, version, MAGIC, b"frequency-state-key-id",
                                     _payload_bytes(num_frequencies, layers, hidden,
                                                    num_frequencies),
                                     earlier_magics=EARLIER_MAGICS)  # fmt: skip

    @property
    def max_chars(self) -> int:
        """The longest valid token: anything longer is refused before it is decoded."""
        return self.envelope.max_chars

    def encode(self, state: StreamState) -> str:
        s = state
        head = _SHAPE.pack(self.layers, self.hidden, len(s.selectors), s.samples_seen, s.energy,
                           self.num_frequencies)  # fmt: skip
        arrays = (np.ascontiguousarray(a, dtype="<f4").tobytes() for a in (s.h, s.c, s.acc))
        stats = s.stats if s.stats is not None else Stats.zero(self.num_frequencies)
        tail = np.ascontiguousarray(stats.to_array(), dtype="<f8").tobytes()
        return self.envelope.seal(head + bytes(s.selectors) + b"".join(arrays) + tail)

    def decode(self, token: object, frequencies: tuple[float, ...]) -> StreamState:
        """A token from a client → its state; `frequencies` is the served list."""
        raw = self.envelope.open(token, self._size)
        layers, hidden, f, seen, energy, served = _SHAPE.unpack_from(raw)
        if (layers, hidden) != (self.layers, self.hidden):
            raise BadState("the stream state has the wrong size for this model")
        if seen > MAX_SAMPLES_SEEN:
            raise BadState("the stream state's sample count is out of range")
        if not (np.isfinite(energy) and energy >= 0.0):
            raise BadState("the stream state's energy is out of range")
        at = _SHAPE.size
        selectors = tuple(raw[at : at + f])
        if not f or len(set(selectors)) != f or max(selectors) >= self.num_frequencies:
            raise BadState("the stream state names frequencies this model does not serve")
        if served != self.num_frequencies:
            raise BadState("the stream state has the wrong size for this model")
        n = layers * f * hidden
        arrays = np.frombuffer(raw, dtype="<f4", count=2 * n + 2 * f, offset=at + f)
        if not np.isfinite(arrays).all():
            raise BadState("the stream state contains NaN or infinite values")
        h, c = (
            a.reshape(layers, f, hidden).astype(np.float32) for a in (arrays[:n], arrays[n : 2 * n])
        )
        acc = arrays[2 * n :].reshape(f, 2).astype(np.float32)
        tail = np.frombuffer(raw, dtype="<f8", count=stats_size(served),
                             offset=at + f + 4 * (2 * n + 2 * f))  # fmt: skip
        stats = Stats.from_array(tail, served) if np.isfinite(tail).all() else None
        if stats is None or not stats.valid(served):
            raise BadState("the stream state's judged sums are out of range")
        if self.window is not None and stats.windows != seen // self.window:
            raise BadState("the stream state's judged sums do not match its sample count")
        return StreamState(h, c, tuple(frequencies[s] for s in selectors), selectors, seen,
                           float(energy), acc, stats)  # fmt: skip

    def _size(self, raw: bytes, at: int) -> int | None:
        if len(raw) < at + _SHAPE.size:
            return None
        layers, hidden, f, _, _, served = _SHAPE.unpack_from(raw, at)
        return _payload_bytes(f, layers, hidden, served)
