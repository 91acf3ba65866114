"""Per-sequence LSTM state between requests: (h, c) for each requested frequency of a stream.

Kept in the worker process, keyed by the TorchServe sequence id. A stream expires after
`idle_s` without a chunk; closing it (the sequence-end header) frees it at once; beyond
`capacity` open streams the least recently used one is dropped.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass
class StreamState:
    h: np.ndarray
    """(layers, F, hidden): one LSTM state per requested frequency."""
    c: np.ndarray
    frequencies: tuple[float, ...]
    """Fixed when the stream opens: later chunks must ask for the same ones."""
    selectors: tuple[int, ...]
    samples_seen: int = 0
    last_used: float = 0.0


class StateStore:
    def __init__(self, idle_s: float, capacity: int, clock: Callable[[], float] = time.monotonic):
        self.idle_s = idle_s
        self.capacity = capacity
        self.clock = clock
        self._states: OrderedDict[str, StreamState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, sequence_id: str) -> bool:
        return self.get(sequence_id) is not None

    def expire(self) -> list[str]:
        """Forget idle streams; returns their ids (oldest first)."""
        cutoff = self.clock() - self.idle_s
        gone = [k for k, s in self._states.items() if s.last_used < cutoff]
        for k in gone:
            del self._states[k]
        return gone

    def get(self, sequence_id: str) -> StreamState | None:
        self.expire()
        return self._states.get(sequence_id)

    def put(self, sequence_id: str, state: StreamState) -> None:
        state.last_used = self.clock()
        self._states[sequence_id] = state
        self._states.move_to_end(sequence_id)
        while len(self._states) > self.capacity:
            self._states.popitem(last=False)

    def close(self, sequence_id: str) -> bool:
        return self._states.pop(sequence_id, None) is not None
